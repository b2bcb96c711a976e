import Foundation
import Logging
import PostgresNIO
import Primitives

/// The fleet store: a PostgreSQL database shared by several runloopd
/// instances (`--store postgres://user:password@host:port/database`), through
/// postgres-nio. Two connections: one for the writer thread, one for readers;
/// each is made again after a failure. Calls block their (non-loop) thread.
public final class PostgresStore: HistoryStore {
    public let kind = "postgres"
    public let location: String
    private let configuration: PostgresConnection.Configuration
    private let writer = Locked<PostgresConnection?>(nil)
    private let reader = Locked<PostgresConnection?>(nil)
    private let logic = HistorySQL(dialect: .postgres)
    private let logger: Logger
    private let connectionIds = Locked(0)

    /// Parses `postgres://user[:password]@host[:port]/database`. TLS is not
    /// used (`sslmode=disable`, the in-cluster default); any other sslmode is refused.
    private let queryTimeout: Double

    public init(
        url: String, connectTimeout: Double = 2, queryTimeout: Double = 10,
        logger: Logger = Logger(label: "runloopd.store")
    ) throws {
        guard let parts = URLComponents(string: url), parts.scheme == "postgres" || parts.scheme == "postgresql",
            let host = parts.host, !host.isEmpty
        else {
            throw StoreError("--store: expected postgres://user:password@host:port/database, got \(Self.redact(url))")
        }
        let mode = parts.queryItems?.first { $0.name == "sslmode" }?.value ?? "disable"
        guard mode == "disable" else {
            throw StoreError("--store: sslmode=\(mode) is not supported (only sslmode=disable)")
        }
        let database = String(parts.path.drop { $0 == "/" })
        var configuration = PostgresConnection.Configuration(
            host: host, port: parts.port ?? 5432, username: parts.user?.removingPercentEncoding ?? "postgres",
            password: parts.password?.removingPercentEncoding, database: database.isEmpty ? nil : database,
            tls: .disable)
        configuration.options.connectTimeout = .milliseconds(Int64(max(0.1, connectTimeout) * 1000))
        self.configuration = configuration
        self.location = Self.redact(url)
        self.logger = logger
        self.queryTimeout = queryTimeout
    }

    deinit { close() }

    /// The URL with its password replaced by `***`.
    public static func redact(_ url: String) -> String {
        guard var parts = URLComponents(string: url), parts.password != nil else { return url }
        parts.password = "***"
        return parts.string ?? url
    }

    private func connection(_ slot: Locked<PostgresConnection?>) throws -> PostgresConnection {
        if let open = slot.withLock({ $0 }), !open.isClosed { return open }
        let id = connectionIds.withLock { n in
            n += 1
            return n
        }
        do {
            let made = try PostgresConnection.connect(
                on: PostgresConnection.defaultEventLoopGroup.next(), configuration: configuration, id: id,
                logger: logger
            ).wait()
            // A connection displaced here (another caller connected meanwhile;
            // it may still be in use) is released after the lock, not inside it.
            let displaced = slot.withLock { c in
                defer { c = made }
                return c
            }
            _ = displaced
            return made
        } catch {
            throw StoreError("cannot connect to \(location): \(Self.reason(error))")
        }
    }

    /// Runs `body` on `slot`'s connection, in a transaction when `transaction`;
    /// a failure closes the connection so the next call connects again.
    private func using<T>(
        _ slot: Locked<PostgresConnection?>, transaction: Bool, _ body: (HistoryLogic) throws -> T
    ) throws -> T {
        let connection = try connection(slot)
        let logger = self.logger
        let timeout = queryTimeout
        // postgres-nio runs each query as an unnamed statement, parsed anew: the flag changes nothing here.
        let logic = HistoryLogic(sql: logic) { text, values, _ in
            var binds = PostgresBindings(capacity: values.count)
            for value in values {
                switch value {
                case .int(let v): binds.append(v)
                case .double(let v): binds.append(v)
                case .text(let v): binds.append(v)
                case .null: binds.appendNull()
                }
            }
            let result = try Self.wait(
                connection.query(PostgresQuery(unsafeSQL: text, binds: binds), logger: logger), seconds: timeout)
            return try result.rows.map { row in try row.map(Self.value) }
        }
        do {
            if transaction { _ = try logic.run("BEGIN", []) }
            let result = try body(logic)
            if transaction { _ = try logic.run("COMMIT", []) }
            return result
        } catch {
            // Whatever state the connection is in, start clean next time (the
            // slot's reference is released after the lock).
            let dropped = slot.withLock { c in
                defer { c = nil }
                return c
            }
            _ = dropped
            _ = try? Self.wait(connection.close(), seconds: 2)
            if let error = error as? StoreError { throw error }
            throw StoreError("\(location): \(Self.reason(error))")
        }
    }

    public func open() throws {
        try using(writer, transaction: true) { logic in
            // Several instances may start at once: one creates the schema.
            _ = try logic.run("SELECT pg_advisory_xact_lock(7261001)", [])
            for statement in logic.sql.schema { _ = try logic.run(statement, []) }
        }
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
    public func size() throws -> Int64 {
        try using(reader, transaction: false) { logic in
            try logic.run("SELECT COALESCE(SUM(octet_length(data)), 0) + 64 * COUNT(*) FROM events", []).first?
                .first?.int ?? 0
        }
    }

    public func prune(_ retention: Retention, now: Double) throws -> Int {
        var removed = 0
        if let maxAge = retention.maxAge {
            removed += try using(writer, transaction: true) { try $0.pruneByAge(maxAge, now: now) }
        }
        if let maxBytes = retention.maxBytes {
            while try size() > maxBytes {
                let count = try using(reader, transaction: false) { try $0.count() }
                if count == 0 { break }
                let n = max(100, count / 10)
                try using(writer, transaction: true) { try $0.deleteOldest(n) }
                removed += min(n, count)
            }
        }
        return removed
    }

    public func close() {
        for slot in [writer, reader] {
            let open = slot.withLock { c in
                defer { c = nil }
                return c
            }
            if let open { _ = try? Self.wait(open.close(), seconds: 2) }
        }
    }

    /// A future's value, or a `StoreError` after `seconds` (the writer never
    /// hangs on a connection that stopped answering; the caller drops it).
    static func wait<T: Sendable>(_ future: EventLoopFuture<T>, seconds: Double) throws -> T {
        let outcome = Locked<Result<T, any Error>?>(nil)
        future.whenComplete { result in
            outcome.withLock { $0 = result }
            outcome.notifyAll()
        }
        let result = outcome.withLock(when: { $0 != nil }, timeout: seconds) { value, _ in value }
        guard let result else { throw StoreError("no answer in \(seconds) s") }
        return try result.get()
    }

    static func reason(_ error: any Error) -> String {
        if let error = error as? PSQLError {
            if let message = error.serverInfo?[.message] { return message }
            if let underlying = error.underlying { return "\(error.code): \(underlying)" }
            return "\(error.code)"
        }
        return "\(error)"
    }

    private static func value(_ cell: PostgresCell) throws -> SQLValue {
        guard cell.bytes != nil else { return .null }
        switch cell.dataType {
        case .int2, .int4, .int8: return .int(try cell.decode(Int64.self))
        case .float4, .float8, .numeric: return .double(try cell.decode(Double.self))
        default: return .text(try cell.decode(String.self))
        }
    }
}
