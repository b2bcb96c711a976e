import CLibPQ
import Foundation
import Logging
import Primitives

/// The fleet store: a PostgreSQL database shared by several runloopd
/// instances (`--store postgres://user:password@host:port/database`), through
/// libpq, PostgreSQL's own C client. Two connections: one for the writer
/// thread, one for the reader queue (`PQSlot`); each is made again after a
/// failure. Calls block their (non-loop) thread, each at most its timeout.
public final class PostgresStore: HistoryStore {
    public let kind = "postgres"
    public let location: String
    /// libpq's keyword/value connection parameters, from the URL.
    private let parameters: [(String, String)]
    private let writer = PQSlot()
    private let reader = PQSlot()
    private let logic = HistorySQL(dialect: .postgres)
    private let logger: Logger
    private let connectTimeout: Double
    private let queryTimeout: Double
    /// `--store-password-file`: read at every connection (a rotated password
    /// is used from the next connection on).
    private let passwordFile: String?
    /// `application_name`, unless the URL gives one: `runloopd` until
    /// `identify`, then `runloopd/<instance id>`.
    private let applicationName = Locked<String?>("runloopd")

    /// The `sslmode` values libpq knows (its default is `prefer`).
    public static let sslModes = ["disable", "allow", "prefer", "require", "verify-ca", "verify-full"]

    /// Parses `postgres://user[:password]@host[:port]/database[?param=value…]`
    /// (libpq's URI form: several `host:port`s, `sslmode`, `sslrootcert`, …);
    /// the user is `postgres` unless given. `connectTimeout` bounds a
    /// connection attempt, `queryTimeout` one statement (a connection that
    /// passes it is dropped). `passwordFile`: a file holding the password
    /// (its first line), read at each connection; without it libpq takes the
    /// URL's password, else `PGPASSWORD`, else its password file
    /// (`passfile=`, `PGPASSFILE` or `~/.pgpass`).
    public init(
        url: String, connectTimeout: Double = 2, queryTimeout: Double = 10, passwordFile: String? = nil,
        logger: Logger = Logger(label: "runloopd.store")
    ) throws {
        guard url.hasPrefix("postgres://") || url.hasPrefix("postgresql://") else {
            throw StoreError("--store: expected postgres://user:password@host:port/database, got \(Self.redact(url))")
        }
        var parsed: [(String, String)] = []
        var error: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(url, &error) else {
            let reason = error.map { String(cString: $0).trimmingCharacters(in: .whitespacesAndNewlines) }
            if let error { PQfreemem(error) }
            throw StoreError("--store: \(reason ?? "cannot parse") in \(Self.redact(url))")
        }
        var option = options
        while let keyword = option.pointee.keyword {
            if let value = option.pointee.val { parsed.append((String(cString: keyword), String(cString: value))) }
            option += 1
        }
        PQconninfoFree(options)
        if let mode = parsed.first(where: { $0.0 == "sslmode" })?.1, !Self.sslModes.contains(mode) {
            throw StoreError("--store: sslmode=\(mode) is not one of \(Self.sslModes.joined(separator: ", "))")
        }
        if !parsed.contains(where: { $0.0 == "user" }) { parsed.append(("user", "postgres")) }
        if parsed.contains(where: { $0.0 == "application_name" }) { applicationName.withLock { $0 = nil } }
        if passwordFile != nil, parsed.contains(where: { $0.0 == "password" }) {
            throw StoreError("--store-password-file: the URL gives a password too; give it in one place")
        }
        self.passwordFile = passwordFile
        self.parameters = parsed
        self.location = Self.redact(url)
        self.logger = logger
        self.connectTimeout = max(0.1, connectTimeout)
        self.queryTimeout = queryTimeout
    }

    deinit { close() }

    /// Names the connections `runloopd/<instance>` in `pg_stat_activity`
    /// (unless the URL gives `application_name`); connections made from now on.
    public func identify(instance: String) {
        applicationName.withLock { name in
            if name != nil { name = "runloopd/\(instance)" }
        }
    }

    /// The URL's parameters, the application name and the password file's password.
    private func connectionParameters() throws -> [(String, String)] {
        var all = parameters
        if let name = applicationName.withLock({ $0 }) { all.append(("application_name", name)) }
        if let passwordFile {
            let text: String
            do {
                text = try String(contentsOfFile: passwordFile, encoding: .utf8)
            } catch {
                throw StoreError("cannot read --store-password-file \(passwordFile): \(Self.reason(error))")
            }
            // The first line, without its end (\n or \r\n).
            let password = text.components(separatedBy: .newlines).first ?? ""
            all.append(("password", password))
        }
        return all
    }

    /// The system's sentence for a file that cannot be read.
    private static func reason(_ error: any Error) -> String {
        if let underlying = (error as NSError).userInfo[NSUnderlyingErrorKey] as? NSError,
            underlying.domain == NSPOSIXErrorDomain
        {
            return String(cString: strerror(Int32(underlying.code)))
        }
        return "\(error)"
    }

    /// The URL with its password (in the user part or a `password=` parameter) replaced by `***`.
    public static func redact(_ url: String) -> String {
        guard let scheme = url.range(of: "://") else { return url }
        let rest = url[scheme.upperBound...]
        let pathStart = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
        var authority = String(rest[..<pathStart])
        if let at = authority.lastIndex(of: "@"), let colon = authority[..<at].firstIndex(of: ":") {
            authority.replaceSubrange(authority.index(after: colon)..<at, with: "***")
        }
        var tail = String(rest[pathStart...])
        if let question = tail.firstIndex(of: "?") {
            let query = tail[tail.index(after: question)...].split(separator: "&", omittingEmptySubsequences: false)
                .map { $0.lowercased().hasPrefix("password=") ? "password=***" : String($0) }
            tail = String(tail[...question]) + query.joined(separator: "&")
        }
        return String(url[..<scheme.upperBound]) + authority + tail
    }

    /// Runs `body` on `slot`'s connection (connecting if it has none), in a
    /// transaction when `transaction`; a failure closes the connection so the
    /// next call connects again.
    private func using<T>(_ slot: PQSlot, transaction: Bool, _ body: (HistoryLogic) throws -> T) throws -> T {
        let (lent, epoch) = slot.take()
        let connection: PQConnection
        if let lent {
            connection = lent
        } else {
            do {
                connection = try PQConnection(parameters: try connectionParameters(), timeout: connectTimeout)
            } catch let error as StoreError {
                throw error
            } catch {
                throw StoreError(
                    "cannot connect to \(location): \(error)", configuration: Self.refusesConfiguration("\(error)"))
            }
            logger.debug("history store connected", metadata: ["store": "\(location)"])
        }
        let timeout = queryTimeout
        var logic = HistoryLogic(sql: logic) { text, values, recurs in
            try connection.execute(text, values, prepare: recurs, timeout: timeout)
        }
        // Events go in by COPY (binary): half the time per event of 500-row INSERTs (docs/history.md).
        logic.insertEvents = { events in
            try connection.copy(Self.copyEvents, timeout: timeout) { send in
                var start = events.startIndex
                var piece = Self.copyHeader
                repeat {
                    let end = min(start + HistoryLogic.rowsPerInsert, events.endIndex)
                    Self.appendCopyRows(events[start..<end], to: &piece)
                    if end == events.endIndex { piece += Self.copyTrailer }
                    try send(piece)
                    piece.removeAll(keepingCapacity: true)
                    start = end
                } while start < events.endIndex
            }
        }
        do {
            if transaction { _ = try logic.run("BEGIN", []) }
            let result = try body(logic)
            if transaction { _ = try logic.run("COMMIT", []) }
            // Back in the slot, unless the store was closed meanwhile.
            slot.giveBack(connection, epoch: epoch)?.finish()
            return result
        } catch {
            // Whatever state the connection is in, start clean next time.
            connection.finish()
            if let error = error as? StoreError { throw error }
            throw StoreError("\(location): \(error)")
        }
    }

    /// Creates the schema, or migrates an older one (additive: new tables
    /// and columns only, so an older runloopd of the fleet still reads and
    /// writes it); a migration is logged with its versions and duration.
    public func open() throws {
        let started = Date()
        let from = try using(writer, transaction: true) { logic -> String in
            // Several instances may start at once: one creates the schema.
            _ = try logic.run("SELECT pg_advisory_xact_lock(7261001)", [])
            let from = try Self.schemaVersion(logic)
            for statement in logic.sql.schema + logic.sql.schemaV2 { _ = try logic.run(statement, []) }
            return from
        }
        let seconds = String(format: "%.3f", Date().timeIntervalSince(started))
        if from == "none" {
            logger.debug("history store created", metadata: ["store": "\(location)", "schema": "v2"])
        } else if from != "v2" {
            logger.info(
                "history store migrated",
                metadata: ["store": "\(location)", "from": "\(from)", "to": "v2", "seconds": "\(seconds)"])
        }
    }

    /// Whether libpq's reason for a failed connection is the server (or the
    /// TLS setup) refusing this configuration, rather than a server that
    /// does not answer: a certificate, TLS, the password, pg_hba, a missing
    /// role or database.
    static func refusesConfiguration(_ reason: String) -> Bool {
        let signs = [
            "certificate", "does not support SSL", "password authentication failed", "no password supplied",
            "pg_hba.conf", "does not exist", "sslmode",
        ]
        return signs.contains { reason.contains($0) }
    }

    /// The schema a database has: `none`, `v1` (no request columns) or `v2`.
    private static func schemaVersion(_ logic: HistoryLogic) throws -> String {
        let tables = try logic.run(
            "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = 'events'",
            [])
        guard (tables.first?.first?.int ?? 0) > 0 else { return "none" }
        let columns = try logic.run(
            "SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = current_schema() "
                + "AND table_name = 'events' AND column_name IN ('request', 'request_at')", [])
        return (columns.first?.first?.int ?? 0) == 2 ? "v2" : "v1"
    }

    public func register(_ instance: InstanceRecord) throws -> Registration {
        try using(writer, transaction: true) { try $0.register(instance) }
    }

    public func write(_ batch: StoreBatch) throws {
        try using(writer, transaction: true) { try $0.write(batch) }
    }

    public func markStopped(instance: String, at: Double) throws {
        try using(writer, transaction: false) { try $0.markStopped(instance: instance, at: at) }
    }

    public func events(_ query: HistoryQuery) throws -> [StoredEvent] {
        try using(reader, transaction: false) { try $0.events(query) }
    }

    public func threads(instance: String?, boot: Int64?, limit: Int) throws -> [StoredThread] {
        try using(reader, transaction: false) { try $0.threads(instance: instance, boot: boot, limit: limit) }
    }

    public func instances() throws -> [InstanceRecord] {
        try using(reader, transaction: false) { try $0.instances() }
    }

    /// The events' payload bytes plus 64 per row (PostgreSQL gives deleted
    /// space back to its own free-space map, not to the file system, so the
    /// files' size would never fall below the limit).
    static let sizeQuery =
        "SELECT COALESCE(SUM(octet_length(data) + COALESCE(octet_length(request), 0)), 0) + 64 * COUNT(*) FROM events"
    /// The same for one instance's events (`--retention-scope instance`).
    static let instanceSizeQuery = sizeQuery + " WHERE instance = $1"

    public func size() throws -> Int64 {
        try using(reader, transaction: false) { try $0.run(Self.sizeQuery, []).first?.first?.int ?? 0 }
    }

    public func forget(instance: String, silentSince: Double) throws -> ForgetResult {
        try using(reader, transaction: false) { try $0.forget(instance: instance, silentSince: silentSince) }
    }

    /// Runs on the writer's connection (the writer thread calls it), never the
    /// readers'. Whole, whatever `yield` says: PostgreSQL's prune is periodic
    /// (there is no cheap check after each commit to resume it).
    public func prune(_ retention: Retention, now: Double, yield: () -> Bool) throws -> Int {
        var removed = 0
        let instance = retention.instance
        if let maxAge = retention.maxAge {
            removed += try using(writer, transaction: true) { try $0.pruneByAge(maxAge, now: now, instance: instance) }
        }
        if let maxBytes = retention.maxBytes {
            // With `--retention-scope instance` the limit bounds this instance's share.
            let (query, values) =
                instance.map { (Self.instanceSizeQuery, [SQLValue.text($0)]) } ?? (Self.sizeQuery, [])
            removed += try using(writer, transaction: false) { logic in
                var removed = 0
                while (try logic.run(query, values).first?.first?.int ?? 0) > maxBytes {
                    let count = try logic.count(instance: instance)
                    // Never to zero: at most half of the rows left go per step
                    // (`count` counts events, up to two a row), so the newest
                    // always stay (an event's text is capped: a few of them
                    // fit any bound above the floor).
                    let n = min(max(100, count / 10), count / 4)
                    if n == 0 { break }
                    try logic.deleteOldest(n, instance: instance)
                    removed += min(n, count)
                }
                return removed
            }
        }
        return removed
    }

    static let copyEvents =
        "COPY events (\(HistorySQL.insertedColumnNames.joined(separator: ", "))) FROM STDIN (FORMAT binary)"

    /// COPY's binary format: the signature, flags and header extension length;
    /// the rows; -1 at the end.
    static let copyHeader: [UInt8] = Array("PGCOPY\n".utf8) + [0xFF, 0x0D, 0x0A, 0x00, 0, 0, 0, 0, 0, 0, 0, 0]
    static let copyTrailer: [UInt8] = [0xFF, 0xFF]

    /// Appends rows in COPY's binary format: per row the field count, then
    /// each field's length (-1: NULL) and bytes (int8 and float8 big-endian,
    /// text as UTF-8).
    static func appendCopyRows(_ events: ArraySlice<StoredEvent>, to out: inout [UInt8]) {
        func int32(_ v: Int32) { withUnsafeBytes(of: v.bigEndian) { out.append(contentsOf: $0) } }
        func bits(_ v: UInt64) {
            int32(8)
            withUnsafeBytes(of: v.bigEndian) { out.append(contentsOf: $0) }
        }
        func text(_ v: String) {
            var v = v
            v.withUTF8 { bytes in
                int32(Int32(bytes.count))
                out.append(contentsOf: bytes)
            }
        }
        for e in events {
            out += [0, 9]
            text(e.instance)
            bits(UInt64(bitPattern: e.boot))
            bits(UInt64(bitPattern: e.seq))
            bits(e.at.bitPattern)
            text(e.type)
            if let thread = e.thread { text(thread) } else { int32(-1) }
            text(e.data)
            if let request = e.request { text(request) } else { int32(-1) }
            if let requestAt = e.requestAt { bits(requestAt.bitPattern) } else { int32(-1) }
        }
    }

    /// Closes both connections; one in use is closed when its caller is done with it.
    public func close() {
        for slot in [writer, reader] { slot.clear()?.finish() }
    }
}

/// One role's connection (the writer's or the readers'), lent to one caller
/// at a time: a libpq connection must not be used by two threads at once, and
/// no libpq call runs under the lock (ARCHITECTURE.md, "Locks"): `take` moves
/// the idle connection out, the caller uses it, `giveBack` moves it in again.
/// A second caller meanwhile connects on its own (the one given back last is
/// finished). `clear` (the store closed) empties the slot and makes every
/// connection lent before it be finished when it comes back.
final class PQSlot: Sendable {
    private struct State {
        var idle: PQConnection?
        var epoch = 0
    }
    private let state = Locked(State())

    /// The idle connection, if any (now the caller's), and the slot's epoch.
    func take() -> (PQConnection?, Int) {
        state.withLock { s in
            defer { s.idle = nil }
            return (s.idle, s.epoch)
        }
    }

    /// Puts `connection` back; returns it when it is not wanted (the slot was
    /// cleared since it was taken, or holds another), for the caller to finish.
    func giveBack(_ connection: PQConnection, epoch: Int) -> PQConnection? {
        state.withLock { s in
            guard s.epoch == epoch, s.idle == nil else { return connection }
            s.idle = connection
            return nil
        }
    }

    /// Empties the slot; returns the idle connection for the caller to finish.
    func clear() -> PQConnection? {
        state.withLock { s in
            defer {
                s.idle = nil
                s.epoch += 1
            }
            return s.idle
        }
    }
}
