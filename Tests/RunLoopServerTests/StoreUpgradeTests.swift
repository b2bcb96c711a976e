import Foundation
import GRDB
import Logging
import Primitives
@testable import RunLoopStore
import Testing

/// Upgrades of the SQLite file (issue 40, docs/upgrades.md): a file the previous schema version made, written by the
/// migrations that version ran, is copied next to itself, migrated, logged,
/// and reads as before; a file a newer runloopd migrated is refused unchanged.
@Suite("Store upgrades")
struct StoreUpgradeTests {
    /// A scratch folder and the history file's path in it.
    static func folder() throws -> (dir: URL, path: String) {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("upgrade-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return (dir, dir.appendingPathComponent("history.sqlite").path)
    }

    /// The file the previous runloopd left: schema up to `version` by the
    /// same migrations it ran (WAL, incremental auto-vacuum, as it made
    /// them), an instance, a thread, and `events` performs written through
    /// the `events` view as its writer wrote them (from v2 on, every tenth
    /// row keeps its request, the next seq). Returns the seqs of the performs.
    @discardableResult
    static func previousFile(_ path: String, version: String, events: Int) throws -> [Int64] {
        var configuration = Configuration()
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA auto_vacuum = INCREMENTAL")
            try db.execute(sql: "PRAGMA journal_mode = WAL")
        }
        let queue = try DatabaseQueue.patient(path, configuration: configuration)
        defer { try? queue.close() }
        try SQLiteUpgrade.migrator().migrate(queue, upTo: version)
        let requests = version != "v1"
        var seqs: [Int64] = []
        try queue.write { db in
            var seq: Int64 = 1
            for n in 1...events {
                let request = requests && n % 10 == 0 ? #"{"method":"POST"}"# : nil
                var columns = ["instance", "boot", "seq", "at", "type", "thread", "data"]
                var values: [(any DatabaseValueConvertible)?] = ["old", 1, seq, 1000 + Double(n), "perform", "t1"]
                values.append(#"{"n":\#(n)}"#)
                if let request {
                    columns += ["request", "request_at"]
                    values += [request, 1000.5 + Double(n)]
                }
                try db.execute(
                    sql:
                        "INSERT INTO events (\(columns.joined(separator: ", "))) VALUES (\(columns.map { _ in "?" }.joined(separator: ", ")))",
                    arguments: StatementArguments(values))
                seqs.append(seq)
                seq += request == nil ? 1 : 2
            }
            try db.execute(
                sql: "INSERT INTO instances (\(HistorySQL.instanceColumns)) VALUES ('old', 'http://127.0.0.1:1/', "
                    + "'0.1.0', 'h', 1, 1, 1000, 1100, NULL, ?)", arguments: [seq - 1])
            try db.execute(
                sql: "INSERT INTO threads (\(HistorySQL.threadColumns)) VALUES ('old', 1, 't1', 'worker', 'loop', "
                    + "1000, NULL, NULL, NULL, NULL)")
        }
        return seqs
    }

    static func migrations(_ path: String) throws -> [String] {
        let queue = try DatabaseQueue.patient(path)
        defer { try? queue.close() }
        return try queue.read { try String.fetchAll($0, sql: "SELECT identifier FROM grdb_migrations") }.sorted()
    }

    /// What a file holds: its schema's statements and its rows (the header's counters aside).
    static func contents(_ path: String) throws -> [String] {
        let queue = try DatabaseQueue.patient(path)
        defer { try? queue.close() }
        return try queue.read { db in
            let schema = try String.fetchAll(
                db, sql: "SELECT type || ' ' || name || ' ' || COALESCE(sql, '') FROM sqlite_master ORDER BY name")
            let rows = try String.fetchAll(
                db, sql: "SELECT seq || ' ' || data || ' ' || COALESCE(request, '') FROM events ORDER BY id")
            let migrations = try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations ORDER BY identifier")
            return schema + rows + migrations
        }
    }

    static func backups(_ dir: URL) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".bak") }.sorted()
    }

    @Test("a file of the previous schema (v3) is copied next to itself, migrated to v4, logged, and reads as before")
    func previousVersionUpgrades() throws {
        let (dir, path) = try Self.folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let seqs = try Self.previousFile(path, version: "v3", events: 500)
        #expect(try Self.migrations(path) == ["v1", "v2", "v3"])

        let log = LogCapture()
        let store = SQLiteStore(path: path, logger: log.logger)
        try store.open()
        defer { store.close() }

        // The copy: next to the file, named for the version it holds, private, the old file as it was.
        let copies = try Self.backups(dir)
        #expect(copies.count == 1)
        let copy = dir.appendingPathComponent(copies.first ?? "none").path
        #expect(copies.first?.hasPrefix("history.sqlite.v3-") == true)
        #expect(StoreOperationsTests.mode(copy) == 0o600)
        #expect(try Self.migrations(copy) == ["v1", "v2", "v3"])
        let old = try DatabaseQueue.patient(copy)
        #expect(try old.read { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM events") } == 500)
        #expect(try old.read { try String.fetchOne($0, sql: "PRAGMA integrity_check") } == "ok")
        try old.close()

        // The log: the copy, then the migration with its versions and duration.
        let lines = log.lines
        #expect(lines.map(\.message) == ["history store copied before its upgrade", "history store migrated"])
        let migrated = lines.last?.metadata ?? [:]
        #expect(migrated["from"] == "v3")
        #expect(migrated["to"] == "v4")
        #expect(migrated["steps"] == "v4")
        #expect(migrated["backup"] == copy)
        #expect(Double(migrated["seconds"] ?? "") != nil)
        #expect(Int(lines.first?.metadata["bytes"] ?? "") ?? 0 > 0)

        // The migrated file: v4, and every event, request and thread as the old runloopd wrote them.
        #expect(try Self.migrations(path) == ["v1", "v2", "v3", "v4"])
        let events = try store.events(HistoryQuery(instance: "old", limit: 1_000, ascending: true))
        #expect(events.count == 550)
        #expect(events.filter { $0.type == "perform" }.map(\.seq) == seqs)
        #expect(events.filter { $0.type == "request" }.count == 50)
        #expect(events.first?.data == #"{"n":1}"#)
        #expect(try store.threads(instance: "old", boot: nil, limit: 10).map(\.thread) == ["t1"])
        // The next boot of the old instance carries on after its events, its thread marked lost.
        let registration = try store.register(
            InstanceRecord(
                id: "old", url: "http://127.0.0.1:1/", version: "0.2.0", host: "h", pid: 2, startedAt: 2000,
                heartbeatAt: 2000))
        #expect(registration.boot == 2)
        #expect(registration.firstSeq == (seqs.last ?? 0) + 2)
        #expect(registration.lostThreads.map(\.thread) == ["t1"])
        try store.write(
            StoreBatch(events: [
                StoredEvent(
                    instance: "old", boot: 2, seq: registration.firstSeq, at: 2001, type: "perform", thread: "t2",
                    data: "{}")
            ]))
        #expect(try store.events(HistoryQuery(instance: "old", limit: 1_000)).count == 551)
        store.close()

        // A second open finds nothing to do: no copy, no line.
        let again = LogCapture()
        let reopened = SQLiteStore(path: path, logger: again.logger)
        try reopened.open()
        reopened.close()
        #expect(again.lines.isEmpty)
        #expect(try Self.backups(dir).count == 1)
    }

    @Test("a file of schema v1 is copied and migrated through v2, v3 and v4 in one start", arguments: ["v1", "v2"])
    func olderVersionsUpgrade(version: String) throws {
        let (dir, path) = try Self.folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        try Self.previousFile(path, version: version, events: 40)
        let log = LogCapture()
        let store = SQLiteStore(path: path, logger: log.logger)
        try store.open()
        defer { store.close() }
        let steps = ["v1", "v2", "v3", "v4"].drop { $0 <= version }.joined(separator: ",")
        #expect(log.lines.last?.metadata["from"] == version)
        #expect(log.lines.last?.metadata["steps"] == steps)
        #expect(try Self.backups(dir).first?.hasPrefix("history.sqlite.\(version)-") == true)
        #expect(try store.events(HistoryQuery(instance: "old", limit: 100)).count == (version == "v1" ? 40 : 44))
    }

    @Test("a file a newer runloopd migrated is refused, unchanged and uncopied, with what to do")
    func newerFileRefused() throws {
        let (dir, path) = try Self.folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        try Self.previousFile(path, version: SQLiteUpgrade.newest, events: 10)
        let queue = try DatabaseQueue.patient(path)
        try queue.write { db in
            try db.execute(sql: "INSERT INTO grdb_migrations VALUES ('v5')")
            try db.execute(sql: "CREATE TABLE future (x TEXT)")
        }
        try queue.close()
        let before = try Self.contents(path)

        let log = LogCapture()
        let store = SQLiteStore(path: path, logger: log.logger)
        let error = #expect(throws: StoreError.self) { try store.open() }
        store.close()
        let message = "\(error.map { $0 as Any } ?? "none")"
        #expect(message.contains("schema v5 from a newer runloopd"))
        #expect(message.contains("docs/upgrades.md"))
        #expect(error?.configuration == true)
        #expect(try Self.backups(dir).isEmpty)
        #expect(log.lines.isEmpty)
        #expect(try Self.migrations(path) == ["v1", "v2", "v3", "v4", "v5"])
        #expect(try Self.contents(path) == before)
    }

    @Test("docs/upgrades.md's SQLite schema is a new file's, statement for statement")
    func documentedSchema() throws {
        let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/upgrades.md")
        let text = try String(contentsOf: docs, encoding: .utf8)
        let block = try #require(text.components(separatedBy: "```sql\n").dropFirst().first)
        let documented = block.components(separatedBy: "\n```").first ?? ""
        let (dir, path) = try Self.folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let store = SQLiteStore(path: path)
        try store.open()
        store.close()
        let queue = try DatabaseQueue.patient(path)
        defer { try? queue.close() }
        let made = try queue.read {
            try String.fetchAll($0, sql: "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY rowid")
        }
        #expect(documented == made.map { $0 + ";" }.joined(separator: "\n"))
    }

    @Test("the copy's name: the version it holds and the UTC time of the upgrade")
    func backupName() {
        let name = SQLiteUpgrade.backupPath("/data/history.sqlite", from: "v3", now: Date(timeIntervalSince1970: 0))
        #expect(name == "/data/history.sqlite.v3-19700101T000000Z.bak")
    }
}

/// A logger whose lines a test reads (message and metadata as text).
final class LogCapture: Sendable {
    struct Line: Sendable {
        var message: String
        var metadata: [String: String]
    }

    private let store = Locked<[Line]>([])

    var lines: [Line] { store.withLock { $0 } }

    var logger: Logger {
        let capture = self
        var logger = Logger(label: "test.store") { _ in Handler(capture: capture) }
        logger.logLevel = .info
        return logger
    }

    fileprivate func append(_ line: Line) { store.withLock { $0.append(line) } }

    private struct Handler: LogHandler {
        let capture: LogCapture
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .info

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let fields = (event.metadata ?? [:]).mapValues { "\($0)" }
            capture.append(Line(message: "\(event.message)", metadata: fields))
        }
    }
}
