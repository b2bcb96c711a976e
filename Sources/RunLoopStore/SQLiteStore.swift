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
    let logic = HistorySQL(dialect: .sqlite)
    /// Most WAL pages between checkpoints, and what the WAL file is cut back
    /// to after one (bytes): a tenth of the size limit, so the file and its
    /// WAL together stay near the limit (SQLite's defaults, 1000 pages and no
    /// cut, let a 1 MB store carry a 4 MB WAL).
    let walBytes: Int64
    /// The bounds a segment rolls over by (`SQLiteSegments`): with neither,
    /// the newest segment takes every event.
    let sizeLimit: Int64?
    let maxAge: Double?
    /// The newest segment's insert texts (`HistorySQL.insertEvent` for 1, 2, 4, … 512 rows), made once per segment.
    let inserts = Locked<(segment: Int, texts: [String])>((0, []))
    /// The inserts' text buffer, kept from batch to batch with its capacity
    /// (the writer's only: taken out for a write, put back after it). A new
    /// buffer of megabytes per batch cost a page fault per few requests.
    let arena = Locked<[UInt8]>([])
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

    func database() throws -> DatabasePool {
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
    func writingDatabase<T>(_ body: (Database) throws -> T) throws -> T {
        try onDatabase { pool in try pool.write { db in try body(db) } }
    }

    private func reading<T>(_ body: (HistoryLogic) throws -> T) throws -> T {
        let logic = logic
        return try readingDatabase { db in try body(Self.logic(db, logic)) }
    }

    func readingDatabase<T>(_ body: (Database) throws -> T) throws -> T {
        try onDatabase { pool in try pool.read { db in try body(db) } }
    }

    /// Runs `access` on the open pool; any error but a `StoreError` is
    /// thrown as one that names this file.
    private func onDatabase<T>(_ access: (DatabasePool) throws -> T) throws -> T {
        do {
            return try access(database())
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreError("\(location): \(Self.reason(error))")
        }
    }

    static func logic(_ db: Database, _ sql: HistorySQL) -> HistoryLogic {
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

    /// The first row id of the newest batch that held events: a size prune
    /// never deletes it or anything after it (the newest events always stay).
    let newestBatch = Locked<Int64>(.max)

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

    /// A size prune stopped by its `yield` before the data was under the target.
    let sizePruning = Locked(false)

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

    static func value(_ value: DatabaseValue) -> SQLValue {
        switch value.storage {
        case .null: .null
        case .int64(let v): .int(v)
        case .double(let v): .double(v)
        case .string(let v): .text(v)
        case .blob(let v): .text(String(decoding: v, as: UTF8.self))
        }
    }
}
