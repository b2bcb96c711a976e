import Foundation
import GRDB
import GRDBSQLite
import Logging
import Primitives

/// The embedded store: one SQLite file (`history.sqlite` in `--data-dir`) in
/// WAL mode through GRDB. The writer thread writes; readers read at the same
/// time from the pool's reader connections.
public final class SQLiteStore: HistoryStore {
    public let kind = "sqlite"
    public let location: String
    private let pool = Locked<DatabasePool?>(nil)
    private let logic = HistorySQL(dialect: .sqlite)
    /// Most WAL pages between checkpoints, and what the WAL file is cut back
    /// to after one (bytes): a tenth of the size limit, so the file and its
    /// WAL together stay near the limit (SQLite's defaults, 1000 pages and no
    /// cut, let a 1 MB store carry a 4 MB WAL).
    private let walBytes: Int64
    /// The bounds a segment rolls over by (`SQLiteSegments`): with neither,
    /// the newest segment takes every event.
    private let sizeLimit: Int64?
    private let maxAge: Double?
    /// The newest segment's insert texts (`HistorySQL.insertEvent` for 1, 2, 4, … 512 rows), made once per segment.
    private let inserts = Locked<(segment: Int, texts: [String])>((0, []))
    /// The inserts' text buffer, kept from batch to batch with its capacity
    /// (the writer's only: taken out for a write, put back after it). A new
    /// buffer of megabytes per batch cost a page fault per few requests.
    private let arena = Locked<[UInt8]>([])
    private let logger: Logger

    /// `path`: the database file (its folder is created if missing).
    /// `sizeLimit`: `--retention-size`, which the WAL's bound and the
    /// segments' size follow; `maxAge`: `--retention`, which the segments' age follows.
    /// `logger`: where an upgrade of the file says what it did (`SQLiteUpgrade`).
    public init(
        path: String, sizeLimit: Int64? = nil, maxAge: Double? = nil,
        logger: Logger = Logger(label: "runloopd.store")
    ) {
        self.location = path
        self.logger = logger
        self.walBytes = min(Self.defaultWALBytes, max(Self.smallestWALBytes, (sizeLimit ?? .max) / 20))
        self.sizeLimit = sizeLimit
        self.maxAge = maxAge
    }

    /// SQLite's own autocheckpoint (1000 pages of 4 KiB).
    static let defaultWALBytes: Int64 = 4_096_000

    /// A new file's page size (bytes). Events are appended a few thousand per
    /// commit: 16 KiB pages write the WAL and checkpoint it in a quarter of
    /// the system calls of SQLite's default 4 KiB (measured, issue 26: the
    /// writer's CPU per perform request 4.7 -> 3.7 µs; 8 KiB and 64 KiB less).
    static let pageSize: Int64 = 16_384

    /// The size bound's trigger and target: past `triggerShare` of the limit
    /// (the data, when the file and its WAL pass it by `stat` after a commit)
    /// the oldest events go until the data is under `targetShare` of it.
    static let triggerShare = 0.9
    static let targetShare = 0.6
    /// Most events one pruning transaction deletes: a hundredth of the
    /// limit's worth, between these two (small steps: each step's pages go
    /// to the WAL, which is checkpointed between steps; too small, and each
    /// commit rewrites the same index pages: with 500 a step, a full default
    /// store's prune wrote 5.3 KB per perform request, with 4,000 4.3 KB).
    static let pruneStep = 4_000
    static let smallestPruneStep = 500

    public func open() throws {
        if pool.withLock({ $0 }) != nil { return }
        let folder = (location as NSString).deletingLastPathComponent
        if !folder.isEmpty {
            do {
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            } catch {
                throw StoreError("cannot create \(folder): \(Self.reason(error))")
            }
        }
        do {
            try Self.restrict(location)
        } catch {
            throw StoreError("cannot create \(location): \(Self.reason(error))")
        }
        var configuration = Configuration()
        configuration.label = "runloopd-history"
        // A busy reader never makes the writer fail at once (and the reverse).
        configuration.busyMode = .timeout(5)
        let pageSize = Self.pageSize
        let walPages = max(64 * 1024 / pageSize, walBytes / pageSize)
        let walBytes = walBytes
        configuration.prepareDatabase { db in
            // Before anything else touches a new file (GRDB turns WAL on next):
            // a new database is created in incremental auto-vacuum, so that
            // retention can give pages back to the file system (the pool's
            // read-only reader connections leave it alone).
            if !db.configuration.readonly {
                // A new file's pages (an existing file keeps its own).
                try db.execute(sql: "PRAGMA page_size = \(pageSize)")
                try db.execute(sql: "PRAGMA auto_vacuum = INCREMENTAL")
                // Debian's SQLite zeroes every deleted row's bytes by default
                // (SECURE_DELETE), which made a prune write its whole size to the
                // WAL; FAST zeroes only what costs no extra I/O. The freed pages
                // leave the file at the prune's incremental vacuum anyway.
                try db.execute(sql: "PRAGMA secure_delete = FAST")
            }
            // WAL with synchronous=NORMAL: a committed batch survives the
            // process being killed (it is in the WAL); a power cut may lose the
            // last batches but never corrupts the file.
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            try db.execute(sql: "PRAGMA wal_autocheckpoint = \(walPages)")
            try db.execute(sql: "PRAGMA journal_size_limit = \(walBytes)")
        }
        do {
            let opened = try DatabasePool(path: location, configuration: configuration)
            // A newer file refused, an older one copied next to it and migrated, logged (SQLiteUpgrade).
            try SQLiteUpgrade.upgrade(opened, path: location, logger: logger)
            Self.narrow(location)
            try opened.write(SQLiteSegments.addPackColumns)
            // A pool another open put there meanwhile is released (and closed
            // by GRDB) after the lock, not inside it.
            let displaced = pool.withLock { p in
                defer { p = opened }
                return p
            }
            _ = displaced
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError("cannot open \(location): \(Self.reason(error))")
        }
    }

    /// An empty store's size (bytes), measured: the schema made in memory
    /// with a new file's page size (every table and index takes a page at
    /// least), one instance registered, and the pages counted. What a size
    /// prune can never go below (docs/history.md, "The floor").
    public static func emptyBytes() throws -> Int64 {
        var configuration = Configuration()
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA page_size = \(pageSize)")
            try db.execute(sql: "PRAGMA auto_vacuum = INCREMENTAL")
        }
        let queue = try DatabaseQueue(configuration: configuration)
        let logic = HistorySQL(dialect: .sqlite)
        try SQLiteUpgrade.migrator().migrate(queue)
        return try queue.write { db in
            _ = try Self.logic(db, logic).register(
                InstanceRecord(
                    id: "floor", url: "http://127.0.0.1:8080/", version: "0", host: "localhost", pid: 1, startedAt: 0,
                    heartbeatAt: 0))
            return try dataBytes(db).data
        }
    }

    /// The smallest size bound for an empty store of `empty` bytes: the
    /// prune's target (`targetShare` of the bound) holds the empty store
    /// and as much again of events, and the smallest WAL beside it.
    public static func floor(empty: Int64) -> Int64 {
        Int64((Double(2 * empty + smallestWALBytes) / targetShare).rounded(.up))
    }

    /// The least WAL bound (`walBytes`: a tenth of the size bound, at least this).
    static let smallestWALBytes: Int64 = 64 * 1024

    /// The history holds request bodies: the file, its WAL and its shared
    /// memory are the owner's only (0600). A missing file is created so
    /// (SQLite gives the WAL and the shared-memory file the database file's
    /// mode); an existing one is narrowed to it. Only before SQLite opens the
    /// file: closing any descriptor of it would drop SQLite's POSIX locks.
    static func restrict(_ path: String) throws {
        let fd = Glibc.open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        Glibc.close(fd)
        narrow(path)
    }

    /// Takes the group's and others' bits off the file, its WAL and its
    /// shared memory (by name: no descriptor opened).
    static func narrow(_ path: String) {
        for file in [path, path + "-wal", path + "-shm"] {
            var info = stat()
            if stat(file, &info) == 0, info.st_mode & 0o077 != 0 { _ = chmod(file, info.st_mode & 0o700) }
        }
    }

    /// The file and its WAL on disk (bytes).
    public func fileBytes() -> Int64 {
        var total: Int64 = 0
        for file in [location, location + "-wal"] {
            var info = stat()
            if stat(file, &info) == 0 { total += Int64(info.st_size) }
        }
        return total
    }

    public func overLimit(_ retention: Retention) -> Bool {
        guard let maxBytes = retention.maxBytes else { return false }
        return Double(fileBytes()) > Double(maxBytes) * Self.triggerShare
    }

    private func database() throws -> DatabasePool {
        if let opened = pool.withLock({ $0 }) { return opened }
        try open()
        guard let opened = pool.withLock({ $0 }) else { throw StoreError("\(location) is not open") }
        return opened
    }

    /// Runs `body` with a `HistoryLogic` inside one write transaction.
    private func writing<T>(_ body: (HistoryLogic) throws -> T) throws -> T {
        let logic = logic
        return try writingDatabase { db in try body(Self.logic(db, logic)) }
    }

    /// Runs `body` inside one write transaction.
    private func writingDatabase<T>(_ body: (Database) throws -> T) throws -> T {
        do {
            return try database().write { db in try body(db) }
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError("\(location): \(Self.reason(error))")
        }
    }

    private func reading<T>(_ body: (HistoryLogic) throws -> T) throws -> T {
        let logic = logic
        return try readingDatabase { db in try body(Self.logic(db, logic)) }
    }

    private func readingDatabase<T>(_ body: (Database) throws -> T) throws -> T {
        do {
            return try database().read { db in try body(db) }
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError("\(location): \(Self.reason(error))")
        }
    }

    private static func logic(_ db: Database, _ sql: HistorySQL) -> HistoryLogic {
        HistoryLogic(sql: sql) { text, values, recurs in
            let arguments = StatementArguments(values.map(Self.databaseValue))
            let statement = recurs ? try db.cachedStatement(sql: text) : try db.makeStatement(sql: text)
            return try Row.fetchAll(statement, arguments: arguments).map { row in
                row.databaseValues.map(Self.value)
            }
        }
    }

    /// A row to insert: `events[last]`, and the pairs before it packed with it.
    struct PackedRow: Equatable {
        var last: Int
        var id: Int64
        var firstId: Int64?
        var firstAt: Double?
        /// The pairs before the last (indices of `events`): `more`'s text.
        var earlier: Range<Int>?
    }

    /// The rows for `events`, ids given from `highWater` on (docs/history.md,
    /// "Packed rows"): a run of performs kept with their requests, of one
    /// thread, one after the other in the batch, whose performs happened
    /// within `HistorySQL.packWindow` of the first, goes in one row, at most
    /// `HistorySQL.packMost` pairs; each pair takes an id, the row the last.
    static func rows(_ events: ArraySlice<StoredEvent>, after highWater: Int64) -> [PackedRow] {
        var rows: [PackedRow] = []
        var next = highWater
        var start = events.startIndex
        while start < events.endIndex {
            let first = events[start]
            var end = start + 1
            if first.request != nil, first.thread != nil, first.firstId == nil {
                while end < events.endIndex, end - start < HistorySQL.packMost {
                    let previous = events[end - 1]
                    let event = events[end]
                    guard event.request != nil, event.firstId == nil, event.thread == first.thread,
                        event.type == first.type, event.instance == first.instance, event.boot == first.boot,
                        event.seq > previous.seq + 1, event.at >= previous.at,
                        event.at - first.at <= HistorySQL.packWindow
                    else { break }
                    end += 1
                }
            }
            let pairs = Int64(end - start)
            var row = PackedRow(last: end - 1, id: next + pairs)
            if pairs > 1 {
                row.firstId = next + 1
                row.firstAt = first.at
                row.earlier = start..<(end - 1)
            }
            rows.append(row)
            next += pairs
            start = end
        }
        return rows
    }

    /// Events through SQLite's C API (packed first: `rows`), in multi-row
    /// INSERTs of a power of two rows (512, then the binary digits of what
    /// is left: ten texts, each prepared once per connection): each chunk's
    /// texts are copied once into one buffer, in one pass that also notes
    /// where each starts and how long it is, and bound in place from it with
    /// their lengths (no `SQLValue`, `DatabaseValue`, copy or `strlen` per
    /// value): the same values GRDB would bind. The ids are given here,
    /// after the largest given before (as AUTOINCREMENT would).
    /// `arena`: the buffer to copy the texts into (its capacity reused).
    static func insert(
        _ events: ArraySlice<StoredEvent>, _ db: Database, _ texts: [String], arena: inout [UInt8]
    ) throws {
        let rows = Self.rows(events, after: try SQLiteSegments.highWater(db))
        // Per row: instance, type, data, thread, request, more (start, length; length -1: NULL).
        var spans: [(start: Int32, count: Int32)] = []
        var start = rows.startIndex
        while start < rows.endIndex {
            var power = HistorySQL.largestInsertPower
            while 1 << power > rows.endIndex - start { power -= 1 }
            let chunk = rows[start..<(start + (1 << power))]
            let text = texts[power]
            let statement = try db.cachedStatement(sql: text).sqliteStatement
            arena.removeAll(keepingCapacity: true)
            spans.removeAll(keepingCapacity: true)
            func add(_ string: String?) {
                guard let string else {
                    spans.append((0, -1))
                    return
                }
                let from = arena.count
                arena.append(contentsOf: string.utf8)
                spans.append((Int32(from), Int32(arena.count - from)))
            }
            for row in chunk {
                let event = events[row.last]
                add(event.instance)
                add(event.type)
                add(event.data)
                add(event.thread)
                add(event.request)
                if let earlier = row.earlier {
                    // `more`, written straight into the buffer (`Pack`).
                    let from = arena.count
                    for pair in events[earlier] {
                        Pack.append(
                            seq: pair.seq, at: pair.at, requestAt: pair.requestAt ?? pair.at, data: pair.data,
                            request: pair.request ?? "", to: &arena)
                    }
                    spans.append((Int32(from), Int32(arena.count - from)))
                } else {
                    spans.append((0, -1))
                }
            }
            let code = arena.withUnsafeBufferPointer { buffer -> Int32 in
                // A chunk of empty texts has no buffer: any valid pointer does for length 0.
                let base = UnsafeRawPointer(buffer.baseAddress ?? UnsafePointer(bitPattern: 1)!)
                    .assumingMemoryBound(to: CChar.self)
                func bind(_ column: Int32, _ span: (start: Int32, count: Int32)) {
                    if span.count < 0 {
                        sqlite3_bind_null(statement, column)
                    } else {
                        sqlite3_bind_text(statement, column, base + Int(span.start), span.count, nil)
                    }
                }
                func bind(_ column: Int32, _ number: Double?) {
                    if let number {
                        sqlite3_bind_double(statement, column, number)
                    } else {
                        sqlite3_bind_null(statement, column)
                    }
                }
                sqlite3_reset(statement)
                for (index, row) in chunk.enumerated() {
                    let event = events[row.last]
                    let first = Int32(index * Self.insertedColumns.count)
                    let at = index * 6
                    sqlite3_bind_int64(statement, first + 1, row.id)
                    bind(first + 2, spans[at])
                    sqlite3_bind_int64(statement, first + 3, event.boot)
                    sqlite3_bind_int64(statement, first + 4, event.seq)
                    sqlite3_bind_double(statement, first + 5, event.at)
                    bind(first + 6, spans[at + 1])
                    bind(first + 7, spans[at + 3])
                    bind(first + 8, spans[at + 2])
                    bind(first + 9, spans[at + 4])
                    bind(first + 10, event.requestAt)
                    if let firstId = row.firstId {
                        sqlite3_bind_int64(statement, first + 11, firstId)
                    } else {
                        sqlite3_bind_null(statement, first + 11)
                    }
                    bind(first + 12, row.firstAt)
                    bind(first + 13, spans[at + 5])
                }
                let code = sqlite3_step(statement)
                // Nothing keeps a pointer into the buffer past here.
                sqlite3_reset(statement)
                sqlite3_clear_bindings(statement)
                return code
            }
            guard code == SQLITE_DONE else {
                throw DatabaseError(
                    resultCode: ResultCode(rawValue: code),
                    message: String(cString: sqlite3_errmsg(db.sqliteConnection)), sql: text)
            }
            start += chunk.count
        }
    }

    /// The columns SQLite's inserts give, in their order.
    static let insertedColumns = ["id"] + HistorySQL.insertedColumnNames + ["first_id", "first_at", "more"]

    public func register(_ instance: InstanceRecord) throws -> Registration {
        try writing { try $0.register(instance) }
    }

    /// The first row id of the newest batch that held events: a size prune
    /// never deletes it or anything after it (the newest events always stay).
    private let newestBatch = Locked<Int64>(.max)

    /// Into the newest segment, which then rolls over if it is full (`roll`).
    public func write(_ batch: StoreBatch) throws {
        let first = try writingDatabase { db -> Int64 in
            let first = try SQLiteSegments.highWater(db) + 1
            let segments = try SQLiteSegments.list(db)
            guard let newest = segments.last else { throw StoreError("\(location) has no events table") }
            let texts = insertTexts(newest)
            var logic = Self.logic(db, logic)
            var buffer = arena.withLock { held in
                defer { held = [] }
                return held
            }
            defer {
                // A buffer a catch-up batch grew past 8 MB is not kept.
                let kept = buffer.capacity <= 8 << 20 ? buffer : []
                arena.withLock { $0 = kept }
            }
            logic.insertEvents = { events in try Self.insert(events, db, texts, arena: &buffer) }
            try logic.write(batch)
            try roll(db, segments)
            return first
        }
        if !batch.events.isEmpty { newestBatch.withLock { $0 = first } }
    }

    /// The multi-row INSERT texts for segment `number`.
    private func insertTexts(_ number: Int) -> [String] {
        if let texts = inserts.withLock({ $0.segment == number ? $0.texts : nil }) { return texts }
        let table = SQLiteSegments.table(number)
        let n = Self.insertedColumns.count
        let texts = (0...HistorySQL.largestInsertPower).map { power in
            let tuple = "(" + Array(repeating: "?", count: n).joined(separator: ", ") + ")"
            return
                "INSERT INTO \(table) (\(Self.insertedColumns.joined(separator: ", "))) VALUES "
                + Array(repeating: tuple, count: 1 << power).joined(separator: ", ")
        }
        inserts.withLock { $0 = (number, texts) }
        return texts
    }

    /// Starts a new newest segment once the newest holds its share of the
    /// size bound's rows (by the rows' average size in the file), or its
    /// first event is older than its share of the age bound.
    private func roll(_ db: Database, _ segments: [Int]) throws {
        guard let newest = segments.last, segments.count < SQLiteSegments.most, sizeLimit != nil || maxAge != nil
        else { return }
        let highWater = try SQLiteSegments.highWater(db)
        let (rows, since) = try SQLiteSegments.newest(db, newest, highWater: highWater)
        guard rows >= SQLiteSegments.fewestRows else { return }
        var due = false
        if let sizeLimit {
            let span = max(1, try SQLiteSegments.idSpan(db, segments, highWater: highWater))
            let (data, pageSize) = try Self.dataBytes(db)
            let perRow = max(1, data / span)
            let bytes = max(Int64(Double(sizeLimit) * SQLiteSegments.share), SQLiteSegments.fewestPages * pageSize)
            due = rows >= max(SQLiteSegments.fewestRows, bytes / perRow)
        }
        if let maxAge, let since, Date().timeIntervalSince1970 - since >= maxAge * SQLiteSegments.ageShare {
            due = true
        }
        guard due else { return }
        try SQLiteSegments.create(db, newest + 1, after: highWater)
        try SQLiteSegments.rebuildView(db, segments + [newest + 1])
    }

    /// Bytes in pages that hold data, and the page size.
    private static func dataBytes(_ db: Database) throws -> (data: Int64, pageSize: Int64) {
        let pages = try Int64.fetchOne(db.cachedStatement(sql: "PRAGMA page_count")) ?? 0
        let free = try Int64.fetchOne(db.cachedStatement(sql: "PRAGMA freelist_count")) ?? 0
        let pageSize = try Int64.fetchOne(db.cachedStatement(sql: "PRAGMA page_size")) ?? Self.pageSize
        return ((pages - free) * pageSize, pageSize)
    }

    public func markStopped(instance: String, at: Double) throws {
        try writing { try $0.markStopped(instance: instance, at: at) }
    }

    public func events(_ query: HistoryQuery) throws -> [StoredEvent] {
        try reading { try $0.events(query) }
    }

    public func threads(instance: String?, boot: Int64?, limit: Int) throws -> [StoredThread] {
        try reading { try $0.threads(instance: instance, boot: boot, limit: limit) }
    }

    public func instances() throws -> [InstanceRecord] {
        try reading { try $0.instances() }
    }

    /// Bytes in use: pages holding data (free pages are given back by the
    /// incremental vacuum after a prune).
    public func size() throws -> Int64 {
        try reading { logic in
            let pages = try logic.run("PRAGMA page_count", []).first?.first?.int ?? 0
            let free = try logic.run("PRAGMA freelist_count", []).first?.first?.int ?? 0
            let pageSize = try logic.run("PRAGMA page_size", []).first?.first?.int ?? 4096
            return (pages - free) * pageSize
        }
    }

    public func forget(instance: String, silentSince: Double) throws -> ForgetResult {
        try writing { try $0.forget(instance: instance, silentSince: silentSince) }
    }

    /// By age, then by size: when the data (pages in use) passes
    /// `triggerShare` of the limit, the oldest events go, at most
    /// `pruneStep` per transaction (the pages they free count at once),
    /// until the data is under `targetShare` of it. The freed pages stay in
    /// the file for the next commits to fill (moving pages to give them back
    /// wrote the file again, a WAL's worth at a time, at every prune): the
    /// file and its WAL stay near the limit. Only when they pass the limit
    /// itself (a lowered limit, a large WAL) do the free pages go back to the
    /// file system and the WAL get emptied: the file shrinks.
    ///
    /// `yield` is asked after each step (a delete, a WAL's worth of vacuum):
    /// true ends this call there. A size prune that stopped goes on at the
    /// next call (the writer calls after each commit while the file and its
    /// WAL pass the trigger): a large prune never holds the writer while its
    /// queue fills.
    public func prune(_ retention: Retention, now: Double, yield: () -> Bool) throws -> Int {
        var removed = 0
        let instance = retention.instance
        if let maxAge = retention.maxAge {
            removed += try writingDatabase { db in try pruneByAge(db, cutoff: now - maxAge, instance: instance) }
        }
        if let maxBytes = retention.maxBytes {
            let target = Int64(Double(maxBytes) * Self.targetShare)
            var data = try size()
            let resuming = sizePruning.withLock { $0 }
            if data > target, resuming || Double(data) > Double(maxBytes) * Self.triggerShare {
                sizePruning.withLock { $0 = true }
                // The average row's size from the span of ids (no count: it reads a whole index).
                let span = try readingDatabase { db in try SQLiteSegments.idSpan(db, try SQLiteSegments.list(db)) }
                let keep = newestBatch.withLock { $0 }
                while data > target {
                    let perRow = max(1, data / max(1, span))
                    let step = min(Self.pruneStep, max(Self.smallestPruneStep, Int(maxBytes / 100 / perRow)))
                    let n = min(step, max(1, Int((data - target) / perRow) + 1))
                    let gone = try writingDatabase { db in try deleteOldest(db, n, instance: instance, below: keep) }
                    removed += gone
                    if gone == 0 { break }
                    data = try size()
                    // The bound before the queue: a prune gives way to waiting
                    // events only once the data is back under the trigger (the
                    // queue, bounded in bytes, drops its oldest meanwhile).
                    if data > target, Double(data) <= Double(maxBytes) * Self.triggerShare, yield() { return removed }
                }
                sizePruning.withLock { $0 = false }
            }
            if fileBytes() > maxBytes { try compact(maxBytes: maxBytes, yield: yield) }
        }
        return removed
    }

    /// The oldest events: the oldest segment whole when it is not the
    /// newest and holds no other instance's events (`instance` nil: any),
    /// else the oldest `n` rows of `instance` (or of all) in the oldest
    /// segment that has some, one by one. Empty older segments go too.
    /// The events that went (rows and the requests kept in them).
    /// `below`: rows from this id on are never deleted (the newest batch).
    private func deleteOldest(_ db: Database, _ n: Int, instance: String?, below: Int64) throws -> Int {
        var segments = try SQLiteSegments.list(db)
        for number in segments {
            let name = SQLiteSegments.table(number)
            let empty = try Int64.fetchOne(db, sql: "SELECT MIN(id) FROM \(name)") == nil
            if number != segments.last {
                if empty {
                    _ = try SQLiteSegments.drop(db, number, segments: segments)
                    segments.removeAll { $0 == number }
                    continue
                }
                let newest = try Int64.fetchOne(db, sql: "SELECT MAX(id) FROM \(name)") ?? .max
                if newest < below, try instance.map({ try SQLiteSegments.onlyOf(db, number, instance: $0) }) ?? true {
                    return try SQLiteSegments.drop(db, number, segments: segments)
                }
            }
            if empty { continue }
            if let instance,
                try Bool.fetchOne(db, sql: "SELECT 1 FROM \(name) WHERE instance = ? LIMIT 1", arguments: [instance])
                    == nil
            {
                continue
            }
            return try Self.logic(db, logic).deleteOldest(n, instance: instance, table: name, below: below) ?? 0
        }
        return 0
    }

    /// Events before `cutoff`: whole segments (not the newest) whose newest
    /// event is older and that hold no other instance's events; then row
    /// by row in the rest. Threads that ended before it too.
    private func pruneByAge(_ db: Database, cutoff: Double, instance: String?) throws -> Int {
        var segments = try SQLiteSegments.list(db)
        var removed = 0
        for number in segments.dropLast() {
            let newestAt = try Double.fetchOne(db, sql: "SELECT MAX(at) FROM \(SQLiteSegments.table(number))")
            guard newestAt.map({ $0 < cutoff }) ?? true else { break }
            guard try instance.map({ try SQLiteSegments.onlyOf(db, number, instance: $0) }) ?? true else { continue }
            removed += try SQLiteSegments.drop(db, number, segments: segments)
            segments.removeAll { $0 == number }
        }
        return removed
            + (try Self.logic(db, logic).pruneByAge(
                0, now: cutoff, instance: instance, tables: segments.map(SQLiteSegments.table)))
    }

    /// A size prune stopped by its `yield` before the data was under the target.
    private let sizePruning = Locked(false)

    /// Gives the free pages back to the file system: the incremental vacuum
    /// moves pages in use into the free ones and cuts the file's end, a WAL's
    /// worth of pages per transaction; the checkpoint copies the WAL into the
    /// file and empties it. Stops early (no checkpoint) when `yield` says so.
    /// It gives way to `yield` only once the file and its WAL are within `maxBytes`.
    private func compact(maxBytes: Int64, yield: () -> Bool) throws {
        do {
            try database().writeWithoutTransaction { db in
                let pageSize = max(512, try Int64.fetchOne(db, sql: "PRAGMA page_size") ?? Self.pageSize)
                let pages = max(4, walBytes / pageSize)
                while try Int.fetchOne(db, sql: "PRAGMA freelist_count") ?? 0 > 0 {
                    try db.execute(sql: "PRAGMA incremental_vacuum(\(pages))")
                    if fileBytes() <= maxBytes, yield() { return }
                }
                try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
            }
        } catch {
            throw StoreError("\(location): \(Self.reason(error))")
        }
    }

    public func close() {
        let opened = pool.withLock { p in
            defer { p = nil }
            return p
        }
        try? opened?.close()
    }

    /// SQLite's own sentence (e.g. "database or disk is full").
    static func reason(_ error: any Error) -> String {
        if let error = error as? DatabaseError {
            return error.message ?? "SQLite error \(error.resultCode.rawValue)"
        }
        let bridged = error as NSError
        if let underlying = bridged.userInfo[NSUnderlyingErrorKey] as? NSError {
            if underlying.domain == NSPOSIXErrorDomain { return String(cString: strerror(Int32(underlying.code))) }
            return underlying.localizedDescription
        }
        return "\(error)"
    }

    private static func databaseValue(_ value: SQLValue) -> DatabaseValue {
        switch value {
        case .int(let v): v.databaseValue
        case .double(let v): v.databaseValue
        case .text(let v): v.databaseValue
        case .null: .null
        }
    }

    private static func value(_ value: DatabaseValue) -> SQLValue {
        switch value.storage {
        case .null: .null
        case .int64(let v): .int(v)
        case .double(let v): .double(v)
        case .string(let v): .text(v)
        case .blob(let v): .text(String(decoding: v, as: UTF8.self))
        }
    }
}
