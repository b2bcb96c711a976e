import Foundation
import GRDB
import Primitives

/// The embedded store: one SQLite file (`history.sqlite` in `--data-dir`) in
/// WAL mode through GRDB. The writer thread writes; readers read at the same
/// time from the pool's reader connections.
public final class SQLiteStore: HistoryStore {
    public let kind = "sqlite"
    public let location: String
    private let pool = Locked<DatabasePool?>(nil)
    private let logic = HistorySQL(dialect: .sqlite)

    /// `path`: the database file (its folder is created if missing).
    public init(path: String) {
        self.location = path
    }

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
        var configuration = Configuration()
        configuration.label = "runloopd-history"
        // A busy reader never makes the writer fail at once (and the reverse).
        configuration.busyMode = .timeout(5)
        configuration.prepareDatabase { db in
            // WAL with synchronous=NORMAL: a committed batch survives the
            // process being killed (it is in the WAL); a power cut may lose the
            // last batches but never corrupts the file.
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
        }
        do {
            let opened = try DatabasePool(path: location, configuration: configuration)
            try opened.writeWithoutTransaction { db in
                // Must precede the first table: lets retention give pages back.
                try db.execute(sql: "PRAGMA auto_vacuum = INCREMENTAL")
            }
            var migrator = DatabaseMigrator()
            let statements = logic.schema
            migrator.registerMigration("v1") { db in
                for statement in statements { try db.execute(sql: statement) }
            }
            try migrator.migrate(opened)
            // A pool another open put there meanwhile is released (and closed
            // by GRDB) after the lock, not inside it.
            let displaced = pool.withLock { p in
                defer { p = opened }
                return p
            }
            _ = displaced
        } catch {
            throw StoreError("cannot open \(location): \(Self.reason(error))")
        }
    }

    private func database() throws -> DatabasePool {
        if let opened = pool.withLock({ $0 }) { return opened }
        try open()
        guard let opened = pool.withLock({ $0 }) else { throw StoreError("\(location) is not open") }
        return opened
    }

    /// Runs `body` with a `HistoryLogic` inside one write transaction.
    private func writing<T>(_ body: (HistoryLogic) throws -> T) throws -> T {
        do {
            return try database().write { db in try body(Self.logic(db, logic)) }
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError("\(location): \(Self.reason(error))")
        }
    }

    private func reading<T>(_ body: (HistoryLogic) throws -> T) throws -> T {
        do {
            return try database().read { db in try body(Self.logic(db, logic)) }
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

    public func register(_ instance: InstanceRecord) throws -> Registration {
        try writing { try $0.register(instance) }
    }

    public func write(_ batch: StoreBatch) throws {
        try writing { try $0.write(batch) }
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

    public func prune(_ retention: Retention, now: Double) throws -> Int {
        var removed = 0
        if let maxAge = retention.maxAge {
            removed += try writing { try $0.pruneByAge(maxAge, now: now) }
        }
        if let maxBytes = retention.maxBytes {
            // The oldest tenth at a time until the data fits.
            while try size() > maxBytes {
                let count = try reading { try $0.count() }
                if count == 0 { break }
                let n = max(100, count / 10)
                try writing { try $0.deleteOldest(n) }
                removed += min(n, count)
            }
        }
        if removed > 0 {
            do {
                let db = try database()
                try db.writeWithoutTransaction { db in
                    try db.execute(sql: "PRAGMA incremental_vacuum")
                    try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
                }
            } catch {
                throw StoreError("\(location): \(Self.reason(error))")
            }
        }
        return removed
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
