/// A bound value, whichever database runs the statement.
public enum SQLValue: Sendable, Equatable {
    case int(Int64)
    case double(Double)
    case text(String)
    case null

    static func optional(_ text: String?) -> SQLValue { text.map(SQLValue.text) ?? .null }
    static func optional(_ number: Double?) -> SQLValue { number.map(SQLValue.double) ?? .null }
}

/// The schema and statements both stores run: one text with the dialect's
/// placeholders (`?` for SQLite, `$1…` for PostgreSQL) and a few types apart.
struct HistorySQL {
    enum Dialect { case sqlite, postgres }
    let dialect: Dialect

    /// The largest chunk of events one statement inserts: 2^9 = 512 rows (SQLite: 6,656 values).
    static let largestInsertPower = 9

    /// The placeholders for `count` values starting at `first` (1-based).
    func marks(_ count: Int, from first: Int = 1) -> String {
        Marks(dialect: dialect).marks(count, from: first)
    }

    /// Placeholders in a dialect (usable before a `HistorySQL` exists).
    struct Marks {
        let dialect: Dialect
        func marks(_ count: Int, from first: Int = 1) -> String {
            (first..<(first + count)).map { dialect == .sqlite ? "?" : "$\($0)" }.joined(separator: ", ")
        }
    }

    private var real: String { dialect == .sqlite ? "REAL" : "DOUBLE PRECISION" }
    private var bigint: String { dialect == .sqlite ? "INTEGER" : "BIGINT" }
    private var serial: String {
        // AUTOINCREMENT: an id is never reused after retention deletes the newest rows.
        dialect == .sqlite ? "INTEGER PRIMARY KEY AUTOINCREMENT" : "BIGSERIAL PRIMARY KEY"
    }

    /// Version 1 of the schema.
    var schema: [String] {
        [
            """
            CREATE TABLE IF NOT EXISTS instances (
                id TEXT PRIMARY KEY, url TEXT NOT NULL, version TEXT NOT NULL, host TEXT NOT NULL,
                pid \(bigint) NOT NULL, boot \(bigint) NOT NULL, started_at \(real) NOT NULL,
                heartbeat_at \(real) NOT NULL, stopped_at \(real), seq_ceiling \(bigint) NOT NULL DEFAULT 0)
            """,
            """
            CREATE TABLE IF NOT EXISTS events (
                id \(serial), instance TEXT NOT NULL, boot \(bigint) NOT NULL, seq \(bigint) NOT NULL,
                at \(real) NOT NULL, type TEXT NOT NULL, thread TEXT, data TEXT NOT NULL)
            """,
            "CREATE INDEX IF NOT EXISTS events_instance_seq ON events (instance, seq)",
            "CREATE INDEX IF NOT EXISTS events_at ON events (at)",
            "CREATE INDEX IF NOT EXISTS events_thread ON events (thread, id)",
            """
            CREATE TABLE IF NOT EXISTS threads (
                instance TEXT NOT NULL, boot \(bigint) NOT NULL, thread TEXT NOT NULL, name TEXT, style TEXT,
                created_at \(real), ended_at \(real), ended_how TEXT, last_exit TEXT, final TEXT,
                PRIMARY KEY (instance, boot, thread))
            """,
        ]
    }

    /// Version 2: a perform's row may keep the request that answered it
    /// (`StoredEvent.request`): two columns, NULL in every other row. SQLite
    /// adds them in its migration "v2"; PostgreSQL runs these at each open.
    var schemaV2: [String] {
        let ifNew = dialect == .postgres ? "IF NOT EXISTS " : ""
        return [
            "ALTER TABLE events ADD COLUMN \(ifNew)request TEXT",
            "ALTER TABLE events ADD COLUMN \(ifNew)request_at \(real)",
        ]
    }

    static let eventColumns = "id, instance, boot, seq, at, type, thread, data, request, request_at"
    /// A packed row's columns (SQLite only, schema v4: `StoredEvent.firstId`, `firstAt`, `more`).
    static let packColumns = "first_id, first_at, more"
    /// What an events query reads: PostgreSQL's rows are never packed.
    var selectedEventColumns: String {
        dialect == .sqlite ? "\(Self.eventColumns), \(Self.packColumns)" : Self.eventColumns
    }
    /// Most pairs in one packed row, and the longest a packed row's pairs
    /// span (seconds, by their performs' times): a query widens its id and
    /// time bounds by these to find the row that holds a bound's pair.
    static let packMost = 32
    static let packWindow = StoredEvent.foldWindow
    /// A packed row's events beyond its last pair (SQLite): two per earlier pair.
    private var packedExtra: String { dialect == .sqlite ? " + 2 * COALESCE(SUM(id - first_id), 0)" : "" }
    /// The columns an insert gives (the id is the store's).
    static let insertedColumnNames = [
        "instance", "boot", "seq", "at", "type", "thread", "data", "request", "request_at",
    ]
    /// Values per inserted event row.
    static let insertedColumns = insertedColumnNames.count
    static let threadColumns = "instance, boot, thread, name, style, created_at, ended_at, ended_how, last_exit, final"
    static let instanceColumns = "id, url, version, host, pid, boot, started_at, heartbeat_at, stopped_at, seq_ceiling"

    /// Inserts a thread row or fills in the fields given (nil keeps what is stored).
    var upsertThread: String {
        let keep = ["name", "style", "created_at", "ended_at", "ended_how", "last_exit", "final"]
            .map { "\($0) = COALESCE(excluded.\($0), threads.\($0))" }.joined(separator: ", ")
        return
            "INSERT INTO threads (\(Self.threadColumns)) VALUES (\(marks(10))) ON CONFLICT (instance, boot, thread) DO UPDATE SET \(keep)"
    }

    static func threadValues(_ t: StoredThread) -> [SQLValue] {
        [
            .text(t.instance), .int(t.boot), .text(t.thread), .optional(t.name), .optional(t.style),
            .optional(t.createdAt), .optional(t.endedAt), .optional(t.endedHow), .optional(t.lastExit),
            .optional(t.final),
        ]
    }

    var heartbeat: String {
        let ceiling = dialect == .sqlite ? "max(seq_ceiling, \(marks(1, from: 2)))" : "GREATEST(seq_ceiling, $2)"
        return
            "UPDATE instances SET heartbeat_at = \(marks(1)), seq_ceiling = \(ceiling) WHERE id = \(marks(1, from: 3))"
    }

    var upsertInstance: String {
        let update = [
            "url", "version", "host", "pid", "boot", "started_at", "heartbeat_at", "stopped_at", "seq_ceiling",
        ]
        .map { "\($0) = excluded.\($0)" }.joined(separator: ", ")
        return
            "INSERT INTO instances (\(Self.instanceColumns)) VALUES (\(marks(10))) ON CONFLICT (id) DO UPDATE SET \(update)"
    }

    static func instanceValues(_ i: InstanceRecord, seqCeiling: Int64) -> [SQLValue] {
        [
            .text(i.id), .text(i.url), .text(i.version), .text(i.host), .int(i.pid), .int(i.boot), .double(i.startedAt),
            .double(i.heartbeatAt), .optional(i.stoppedAt), .int(seqCeiling),
        ]
    }

    var selectInstance: String { "SELECT \(Self.instanceColumns) FROM instances WHERE id = \(marks(1))" }
    /// The instance's largest event id: its last row's seq, + 1 when that row
    /// keeps a request too (through the (instance, seq) index, one row read).
    var maxSeq: String {
        "SELECT seq + CASE WHEN request IS NULL THEN 0 ELSE 1 END FROM events WHERE instance = \(marks(1)) ORDER BY seq DESC LIMIT 1"
    }
    var openThreads: String {
        "SELECT \(Self.threadColumns) FROM threads WHERE instance = \(marks(1)) AND boot < \(marks(1, from: 2)) AND ended_at IS NULL"
    }
    var markLost: String {
        "UPDATE threads SET ended_at = \(marks(1)), ended_how = 'lost' WHERE instance = \(marks(1, from: 2)) AND boot = \(marks(1, from: 3)) AND thread = \(marks(1, from: 4))"
    }
    var markStopped: String {
        "UPDATE instances SET stopped_at = \(marks(1)), heartbeat_at = \(marks(1, from: 2)) WHERE id = \(marks(1, from: 3))"
    }

    /// The events query: newest first unless ascending; `afterSeq` orders by
    /// seq. It reads rows: a perform's row may hold its request too
    /// (`HistoryLogic.events` gives the events), found by the perform's time.
    func events(_ q: HistoryQuery) -> (String, [SQLValue]) {
        var clauses: [String] = []
        var values: [SQLValue] = []
        func add(_ clause: (String) -> String, _ value: SQLValue) {
            values.append(value)
            clauses.append(clause(marks(1, from: values.count)))
        }
        if let instance = q.instance { add({ "instance = \($0)" }, .text(instance)) }
        if let thread = q.thread { add({ "thread = \($0)" }, .text(thread)) }
        if !q.types.isEmpty {
            let first = values.count + 1
            values.append(contentsOf: q.types.map(SQLValue.text))
            let named = "type IN (\(marks(q.types.count, from: first)))"
            // A request may be kept in its perform's row.
            clauses.append(q.types.contains("request") ? "(\(named) OR request IS NOT NULL)" : named)
        }
        // A packed row's own columns are its last pair's, so lower bounds
        // (since, an ascending cursor, afterSeq) find it as they are; an upper
        // bound also finds the row whose first pair is under it, through the
        // row's index range widened by a packed row's span (SQLite).
        func below(_ column: String, _ first: String, _ bound: SQLValue, widened: SQLValue) {
            guard dialect == .sqlite else {
                add({ "\(column) < \($0)" }, bound)
                return
            }
            values += [widened, bound, bound]
            let (a, b, c) = (values.count - 2, values.count - 1, values.count)
            clauses.append(
                "\(column) < \(marks(1, from: a)) AND (\(column) < \(marks(1, from: b)) OR \(first) < \(marks(1, from: c)))"
            )
        }
        if let since = q.since { add({ "at >= \($0)" }, .double(since)) }
        if let until = q.until { below("at", "first_at", .double(until), widened: .double(until + Self.packWindow)) }
        if let cursor = q.cursor {
            if q.ascending {
                add({ "id > \($0)" }, .int(cursor))
            } else {
                below("id", "first_id", .int(cursor), widened: .int(cursor + Int64(Self.packMost)))
            }
        }
        if let after = q.afterSeq { add({ "seq > \($0)" }, .int(after)) }
        let filter = clauses.isEmpty ? "" : " WHERE " + clauses.joined(separator: " AND ")
        let order = q.afterSeq != nil ? "seq ASC" : (q.ascending ? "id ASC" : "id DESC")
        values.append(.int(Int64(max(0, q.limit))))
        return (
            "SELECT \(selectedEventColumns) FROM events\(filter) ORDER BY \(order) LIMIT \(marks(1, from: values.count))",
            values
        )
    }

    func threads(instance: String?, boot: Int64?, limit: Int) -> (String, [SQLValue]) {
        var clauses: [String] = []
        var values: [SQLValue] = []
        if let instance {
            values.append(.text(instance))
            clauses.append("instance = \(marks(1, from: values.count))")
        }
        if let boot {
            values.append(.int(boot))
            clauses.append("boot = \(marks(1, from: values.count))")
        }
        values.append(.int(Int64(max(0, limit))))
        let filter = clauses.isEmpty ? "" : " WHERE " + clauses.joined(separator: " AND ")
        return (
            "SELECT \(Self.threadColumns) FROM threads\(filter) ORDER BY COALESCE(created_at, 0) DESC, thread DESC LIMIT \(marks(1, from: values.count))",
            values
        )
    }

    var instances: String { "SELECT \(Self.instanceColumns) FROM instances ORDER BY started_at DESC" }

    /// Retention by age: events (of `table`), then threads that ended
    /// before the cutoff (`$1`); with `instance`, only that instance's (`$2`).
    func pruneByAge(instance: Bool, table: String = "events") -> [String] {
        let mine = instance ? " AND instance = \(marks(1, from: 2))" : ""
        return [
            "DELETE FROM \(table) WHERE at < \(marks(1))\(mine)",
            "DELETE FROM threads WHERE ended_at < \(marks(1))\(mine)",
        ]
    }

    /// The oldest `$1` events; with `instance`, that instance's (`$1` the
    /// instance, `$2` how many, by its event ids: the index on (instance,
    /// seq) finds them). SQLite's `?` bind in the order of the text.
    /// `bounded` (SQLite): only rows under an id, bound before the count.
    func pruneOldest(instance: Bool, table: String = "events", bounded: Bool = false) -> String {
        "DELETE FROM \(table) WHERE id IN (\(oldest("id", instance: instance, table: table, bounded: bounded)))"
    }

    /// The requests kept in the rows `pruneOldest` deletes (the same values).
    func foldedInOldest(instance: Bool, table: String = "events", bounded: Bool = false) -> String {
        "SELECT COUNT(request)\(packedExtra) FROM (\(oldest(dialect == .sqlite ? "request, id, first_id" : "request", instance: instance, table: table, bounded: bounded))) AS oldest"
    }

    /// SQLite takes the fleet's oldest by their ids' span, not by rows: a
    /// packed row holds up to `packMost` pairs' ids, and the size prune
    /// counts in ids. (An instance's own oldest are counted in rows.)
    private func oldest(_ column: String, instance: Bool, table: String, bounded: Bool = false) -> String {
        let under = bounded ? " AND id < ?" : ""
        if instance {
            return
                "SELECT \(column) FROM \(table) WHERE instance = \(marks(1))\(under) ORDER BY seq ASC LIMIT \(marks(1, from: 2))"
        }
        if dialect == .sqlite {
            return
                "SELECT \(column) FROM \(table) WHERE \(bounded ? "id < ? AND " : "")id < (SELECT MIN(id) FROM \(table)) + \(marks(1))"
        }
        return "SELECT \(column) FROM \(table) ORDER BY id ASC LIMIT \(marks(1))"
    }

    /// The requests kept in the rows the age's first DELETE removes (its values).
    func foldedBeforeAge(instance: Bool, table: String = "events") -> String {
        "SELECT COUNT(request)\(packedExtra) FROM \(table) WHERE at < \(marks(1))"
            + (instance ? " AND instance = \(marks(1, from: 2))" : "")
    }

    /// How many events (`$1`: that instance's): rows, and the requests kept in them.
    func count(instance: Bool) -> String {
        "SELECT COUNT(*) + COUNT(request)\(packedExtra) FROM events" + (instance ? " WHERE instance = \(marks(1))" : "")
    }

    /// Deletes an instance's row unless it runs: stopped cleanly, or its
    /// heartbeat older than `$2`. Returns the id when it went.
    var forgetInstance: String {
        "DELETE FROM instances WHERE id = \(marks(1)) AND (stopped_at IS NOT NULL OR heartbeat_at < \(marks(1, from: 2))) RETURNING id"
    }
}

/// Row decoding shared by both stores: a row is read as `[SQLValue]` in the
/// column order of `HistorySQL`'s selects.
extension SQLValue {
    var int: Int64 {
        switch self {
        case .int(let v): v
        case .double(let v): Int64(v)
        case .text(let v): Int64(v) ?? 0
        case .null: 0
        }
    }
    var double: Double? {
        switch self {
        case .int(let v): Double(v)
        case .double(let v): v
        case .text(let v): Double(v)
        case .null: nil
        }
    }
    var text: String? {
        switch self {
        case .text(let v): v
        case .int(let v): String(v)
        case .double(let v): String(v)
        case .null: nil
        }
    }
}

extension StoredEvent {
    init(row r: [SQLValue]) {
        let packed = r.count > 12 && r[10] != .null
        self.init(
            id: r[0].int, instance: r[1].text ?? "", boot: r[2].int, seq: r[3].int, at: r[4].double ?? 0,
            type: r[5].text ?? "", thread: r[6].text, data: r[7].text ?? "{}", request: r[8].text,
            requestAt: r[9].double, firstId: packed ? r[10].int : nil, firstAt: packed ? r[11].double : nil,
            more: packed ? r[12].text : nil)
    }
}

extension StoredThread {
    init(row r: [SQLValue]) {
        self.init(
            instance: r[0].text ?? "", boot: r[1].int, thread: r[2].text ?? "", name: r[3].text, style: r[4].text,
            createdAt: r[5].double, endedAt: r[6].double, endedHow: r[7].text, lastExit: r[8].text, final: r[9].text)
    }
}

extension InstanceRecord {
    init(row r: [SQLValue]) {
        self.init(
            id: r[0].text ?? "", url: r[1].text ?? "", version: r[2].text ?? "", host: r[3].text ?? "", pid: r[4].int,
            boot: r[5].int, startedAt: r[6].double ?? 0, heartbeatAt: r[7].double ?? 0, stoppedAt: r[8].double)
    }
}
