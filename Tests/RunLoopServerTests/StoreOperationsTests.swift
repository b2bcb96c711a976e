import CLibPQ
import Foundation
import GRDB
import RunLoopServer
@testable import RunLoopStore
import RunLoopTestSupport
import Testing

/// The store as operators run it (issue 28): retention scoped to one
/// instance, SQLite's file bounded near its limit and private to its owner,
/// forgetting instances, and PostgreSQL's password file, application name
/// and TLS refusals, against a real SQLite file and the real PostgreSQL of
/// `scripts/with-postgres.sh`.
@Suite("Store operations")
struct StoreOperationsTests {
    static let padding = String(repeating: "x", count: 1_000)

    static func event(_ instance: String, _ seq: Int64, at: Double? = nil) -> StoredEvent {
        StoredEvent(
            instance: instance, boot: 1, seq: seq, at: at ?? Double(seq), type: "perform", thread: "t1",
            data: #"{"pad":"\#(padding)"}"#)
    }

    /// The seqs an instance has kept, oldest first.
    static func seqs(_ store: any HistoryStore, _ instance: String) throws -> [Int64] {
        try store.events(HistoryQuery(instance: instance, limit: 100_000, ascending: true)).map(\.seq)
    }

    @Test(
        "retention of one instance never deletes another's events or threads; the fleet scope prunes all (PostgreSQL)",
        .needsPostgres)
    func scopedRetentionOnPostgres() throws { try scopedRetention(kind: "postgres") }

    @Test(
        "retention of one instance never deletes another's events or threads; the fleet scope prunes all",
        arguments: ["sqlite"])
    func scopedRetention(kind: String) throws {
        try HistoryStoreTests.withOpenStore(kind) { store in
            for id in ["a", "b"] {
                _ = try store.register(HistoryStoreTests.instance(id))
                try store.write(
                    StoreBatch(
                        events: (1...300).map { Self.event(id, Int64($0)) },
                        threads: [
                            StoredThread(instance: id, boot: 1, thread: "t1", createdAt: 1, endedAt: 2, endedHow: "x")
                        ]
                    ))
            }
            let b = try Self.seqs(store, "b")
            #expect(b == Array(1...300))

            // By age: a's old events and ended threads go, b's stay.
            let byAge = try store.prune(Retention(maxAge: 100, maxBytes: nil, instance: "a"), now: 300.5)
            #expect(byAge == 200)
            #expect(try Self.seqs(store, "a") == Array(201...300))
            #expect(try Self.seqs(store, "b") == b)
            #expect(try store.threads(instance: "a", boot: nil, limit: 10).isEmpty)
            #expect(try store.threads(instance: "b", boot: nil, limit: 10).count == 1)

            // By size, far below what either holds: a loses its oldest (all of
            // them if need be), b nothing.
            let bySize = try store.prune(Retention(maxAge: nil, maxBytes: 20_000, instance: "a"), now: 300.5)
            #expect(bySize > 0)
            let a = try Self.seqs(store, "a")
            #expect(a.count < 100)
            #expect(a.isEmpty || a == Array(a[0]...300))
            #expect(try Self.seqs(store, "b") == b)

            // The fleet scope (one designated instance) prunes everyone's.
            let fleet = try store.prune(Retention(maxAge: 100, maxBytes: nil), now: 300.5)
            #expect(fleet == 200 + 0)
            #expect(try Self.seqs(store, "b") == Array(201...300))
            #expect(try store.threads(instance: "b", boot: nil, limit: 10).isEmpty)
        }
    }

    @Test(
        "forget: a stopped or silent instance goes, a fresh one stays, an unknown one is said to be (PostgreSQL)",
        .needsPostgres)
    func forgetOnPostgres() throws { try forget(kind: "postgres") }

    @Test(
        "forget: a stopped or silent instance goes, a fresh one stays, an unknown one is said to be",
        arguments: ["sqlite"])
    func forget(kind: String) throws {
        try HistoryStoreTests.withOpenStore(kind) { store in
            for id in ["live", "stopped", "silent"] {
                _ = try store.register(HistoryStoreTests.instance(id, at: 1_000))
            }
            try store.write(StoreBatch(events: [Self.event("silent", 1)]))
            try store.markStopped(instance: "stopped", at: 1_100)
            try store.write(StoreBatch(heartbeat: ("live", 2_000, 10)))
            // The judge saw live's heartbeat at 1000; it beat again at 2000: it stays.
            #expect(try store.forget(instance: "live", silentSince: 1_000.001) == .running)
            #expect(try store.forget(instance: "stopped", silentSince: 0) == .forgotten)
            #expect(try store.forget(instance: "silent", silentSince: 1_000.001) == .forgotten)
            #expect(try store.forget(instance: "nobody", silentSince: 1e12) == .unknown)
            #expect(try store.instances().map(\.id) == ["live"])
            // Its history stays.
            #expect(try Self.seqs(store, "silent") == [1])
        }
    }

    /// Mode bits of a file (nil: missing).
    static func mode(_ path: String) -> mode_t? {
        var info = stat()
        return stat(path, &info) == 0 ? info.st_mode & 0o777 : nil
    }

    @Test("SQLite: the file, WAL and shared memory are 0600; incremental auto-vacuum, an old file converted once")
    func sqliteFile() throws {
        try withTemporaryPath("store") { dir in
            let path = dir.appendingPathComponent("history.sqlite").path
            let store = SQLiteStore(path: path)
            try store.open()
            _ = try store.register(HistoryStoreTests.instance("i1"))
            try store.write(StoreBatch(events: [Self.event("i1", 1)]))
            for file in [path, path + "-wal", path + "-shm"] { #expect(Self.mode(file) == 0o600, "\(file)") }
            store.close()
            #expect(try StoreOperationsTests.pragma(path, "auto_vacuum") == 2)

            // A file from before (auto_vacuum=0, 0644, a table with rows): converted, kept, narrowed.
            let old = dir.appendingPathComponent("old.sqlite").path
            let legacy = try DatabaseQueue.patient(old)
            try legacy.write { db in
                try db.execute(sql: "CREATE TABLE legacy (x TEXT)")
                try db.execute(sql: "INSERT INTO legacy VALUES ('kept')")
            }
            try legacy.close()
            chmod(old, 0o644)
            #expect(try Self.pragma(old, "auto_vacuum") == 0)
            let reopened = SQLiteStore(path: old)
            try reopened.open()
            _ = try reopened.register(HistoryStoreTests.instance("i1"))
            reopened.close()
            #expect(try Self.pragma(old, "auto_vacuum") == 2)
            #expect(Self.mode(old) == 0o600)
            let db = try DatabaseQueue.patient(old)
            defer { try? db.close() }
            #expect(try db.read { try String.fetchOne($0, sql: "SELECT x FROM legacy") } == "kept")
            #expect(try db.read { try String.fetchOne($0, sql: "PRAGMA integrity_check") } == "ok")
        }
    }

    @Test("SQLite: a file of schema v1 (an earlier runloopd's) gains the request columns; its rows read as before")
    func sqliteSchemaV1File() throws {
        try withTemporaryPath("store", folder: true) { dir in
            let path = dir.appendingPathComponent("history.sqlite").path
            // What an earlier runloopd left: the v1 tables, GRDB's record of the migration, a row.
            let v1 = try DatabaseQueue.patient(path)
            try v1.write { db in
                try db.execute(sql: "PRAGMA auto_vacuum = INCREMENTAL")
                for statement in HistorySQL(dialect: .sqlite).schema { try db.execute(sql: statement) }
                try db.execute(sql: "CREATE TABLE grdb_migrations (identifier TEXT NOT NULL PRIMARY KEY)")
                try db.execute(sql: "INSERT INTO grdb_migrations VALUES ('v1')")
                try db.execute(
                    sql: """
                        INSERT INTO events (instance, boot, seq, at, type, thread, data)
                        VALUES ('i1', 1, 1, 1, 'perform', 't1', '{}')
                        """)
            }
            try v1.close()
            let store = SQLiteStore(path: path)
            try store.open()
            defer { store.close() }
            let registration = try store.register(HistoryStoreTests.instance("i1"))
            #expect(registration.firstSeq == 2)
            var pair = Self.event("i1", 2)
            pair.request = #"{"ok":true}"#
            pair.requestAt = 2
            try store.write(StoreBatch(events: [pair]))
            #expect(try store.events(HistoryQuery(limit: 10, ascending: true)).map(\.seq) == [1, 2, 3])
        }
    }

    static func pragma(_ path: String, _ name: String) throws -> Int? {
        let db = try DatabaseQueue.patient(path)
        defer { try? db.close() }
        return try db.read { try Int.fetchOne($0, sql: "PRAGMA \(name)") }
    }

    /// Writes `events` of ~1 KB in batches of 50 as the writer does (a commit,
    /// then a prune when the file passes the trigger); the largest the file
    /// and its WAL were after any commit or prune, and the size at the end.
    static func load(_ store: SQLiteStore, limit: Int64, from first: Int64, events: Int) throws -> (
        peak: Int64, level: Int64
    ) {
        let retention = Retention(maxAge: nil, maxBytes: limit, instance: "i1")
        var peak: Int64 = 0
        var seq = first
        while seq < first + Int64(events) {
            try store.write(StoreBatch(events: (seq..<seq + 50).map { Self.event("i1", $0) }))
            seq += 50
            peak = max(peak, store.fileBytes())
            if store.overLimit(retention) { _ = try store.prune(retention, now: Double(seq)) }
            peak = max(peak, store.fileBytes())
        }
        return (peak, store.fileBytes())
    }

    @Test("SQLite: under a write load the file and its WAL stay near --retention-size; a lower limit shrinks it")
    func sqliteBound() throws {
        try withTemporaryPath("store") { dir in
            let path = dir.appendingPathComponent("history.sqlite").path
            let limit: Int64 = 1_000_000
            let store = SQLiteStore(path: path, sizeLimit: limit)
            try store.open()
            _ = try store.register(HistoryStoreTests.instance("i1"))
            // About 6 MB of events through a 1 MB store.
            let (peak, level) = try Self.load(store, limit: limit, from: 1, events: 6_000)
            print("sqlite bound, limit \(limit): peak \(peak) bytes (file + WAL), level \(level)")
            #expect(peak <= limit * 3 / 2)
            #expect(level <= limit)
            // The newest are kept, contiguous.
            let kept = try StoreOperationsTests.seqs(store, "i1")
            #expect(kept.last == 6_000)
            #expect(kept == Array(kept[0]...6_000))
            store.close()

            // Restarted with a lower limit: the first commit's prune shrinks the file.
            let lower: Int64 = 300_000
            let smaller = SQLiteStore(path: path, sizeLimit: lower)
            try smaller.open()
            let after = try Self.load(smaller, limit: lower, from: 6_001, events: 1_000)
            print("sqlite bound, lowered to \(lower): peak \(after.peak) bytes (file + WAL), level \(after.level)")
            #expect(after.level <= lower)
            #expect(after.peak <= limit * 3 / 2)
            smaller.close()
            #expect(Self.mode(path) == 0o600)
        }
    }
}

/// PostgreSQL as operators run it; each case needs `scripts/with-postgres.sh`.
@Suite("Store operations: PostgreSQL")
struct PostgresOperationsTests {
    static var environment: [String: String] { ProcessInfo.processInfo.environment }

    @Test(
        "application_name is runloopd/<instance id> unless the URL names one",
        .needsPostgres)
    func applicationName() throws {
        let base = try #require(PostgresTestDatabase.url)
        let database = try PostgresTestDatabase.create()
        defer { database.drop() }
        let name = try #require(URLComponents(string: database.url)?.path.dropFirst())
        let store = try PostgresStore(url: database.url)
        store.identify(instance: "pod-a")
        try store.open()
        _ = try store.register(HistoryStoreTests.instance("pod-a"))
        #expect(try store.instances().count == 1)
        let names = try PostgresTestDatabase.admin(
            base, "SELECT string_agg(DISTINCT application_name, ',') FROM pg_stat_activity WHERE datname = '\(name)'")
        #expect(names == "runloopd/pod-a")
        store.close()

        let named = try PostgresStore(url: database.url + "&application_name=mine")
        named.identify(instance: "pod-b")
        try named.open()
        defer { named.close() }
        let now = try PostgresTestDatabase.admin(
            base,
            "SELECT string_agg(DISTINCT application_name, ',') FROM pg_stat_activity WHERE datname = '\(name)' AND application_name <> 'runloopd/pod-a'"
        )
        #expect(now == "mine")
    }

    @Test(
        "a password file (read at each connection) or libpq's passfile; no password or a wrong one is refused",
        .enabled(
            if: environment["RUNLOOPD_TEST_POSTGRES_PASSWORD_URL"] != nil, "needs scripts/with-postgres.sh"))
    func passwordFile() throws {
        let url = try #require(Self.environment["RUNLOOPD_TEST_POSTGRES_PASSWORD_URL"])
        let password = try #require(Self.environment["RUNLOOPD_TEST_POSTGRES_PASSWORD"])
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("pw-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("password").path

        func failure(_ store: PostgresStore) -> String {
            do {
                try store.open()
                store.close()
                return ""
            } catch { return "\(error)" }
        }
        // No password at all: the server asks for one.
        #expect(failure(try PostgresStore(url: url)).contains("password"))
        // The file's first line is the password (its newline is not).
        try Data("wrong\n".utf8).write(to: URL(fileURLWithPath: file))
        let store = try PostgresStore(url: url, passwordFile: file)
        let wrong = failure(store)
        #expect(wrong.contains("password authentication failed"), "\(wrong)")
        #expect(!wrong.contains("wrong"))
        // Rotated: the next connection reads it again.
        try Data("\(password)\r\n".utf8).write(to: URL(fileURLWithPath: file))
        #expect(failure(store) == "")
        // A file that cannot be read says so.
        let missing = try PostgresStore(url: url, passwordFile: dir.appendingPathComponent("none").path)
        #expect(failure(missing).contains("cannot read --store-password-file"))
        // Not in two places.
        #expect(throws: StoreError.self) {
            try PostgresStore(
                url: url.replacingOccurrences(of: "runloopd_pw@", with: "runloopd_pw:x@"), passwordFile: file)
        }
        // libpq's own password file (PGPASSFILE's format), named in the URL.
        let pgpass = dir.appendingPathComponent("pgpass").path
        try Data("*:*:*:runloopd_pw:\(password)\n".utf8).write(to: URL(fileURLWithPath: pgpass))
        chmod(pgpass, 0o600)
        #expect(failure(try PostgresStore(url: url + "&passfile=\(pgpass)")) == "")
    }

    @Test(
        "TLS: a root certificate that did not sign the server's is refused, saying why",
        .enabled(if: environment["RUNLOOPD_TEST_POSTGRES_CA"] != nil, "needs scripts/with-postgres.sh's TLS"))
    func wrongRoot() throws {
        let database = try PostgresTestDatabase.create()
        defer { database.drop() }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ca-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        // Another self-signed certificate for the same name: the server's was not signed by it.
        let openssl = Process()
        openssl.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        openssl.arguments = [
            "openssl", "req", "-new", "-x509", "-days", "1", "-nodes", "-subj", "/CN=127.0.0.1", "-addext",
            "subjectAltName=IP:127.0.0.1", "-keyout", dir.appendingPathComponent("k").path, "-out",
            dir.appendingPathComponent("root.crt").path,
        ]
        openssl.standardError = FileHandle.nullDevice
        openssl.standardOutput = FileHandle.nullDevice
        try openssl.run()
        openssl.waitUntilExit()
        try #require(openssl.terminationStatus == 0)
        for mode in ["verify-ca", "verify-full"] {
            let url = database.url.replacingOccurrences(
                of: "sslmode=disable",
                with: "sslmode=\(mode)&sslrootcert=\(dir.appendingPathComponent("root.crt").path)")
            let store = try PostgresStore(url: url)
            var message = ""
            do { try store.open() } catch { message = "\(error)" }
            store.close()
            #expect(message.contains("certificate verify failed"), "\(mode): \(message)")
        }
    }
}
