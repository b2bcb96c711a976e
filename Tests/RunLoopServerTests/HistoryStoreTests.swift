import CLibPQ
import Foundation
import GRDB
import RunLoopStore
import Testing

/// The two stores behind `HistoryStore`, against a real SQLite file and a
/// real PostgreSQL (`scripts/with-postgres.sh` starts one and sets
/// RUNLOOPD_TEST_POSTGRES_URL; `make test` runs the suite inside it). Each
/// case gets a database of its own.
@Suite("History stores")
struct HistoryStoreTests {
    /// A fresh, empty store of `kind` (removed by `drop`).
    static func fresh(_ kind: String) throws -> (store: any HistoryStore, drop: () -> Void) {
        if kind == "sqlite" {
            let dir = FileManager.default.temporaryDirectory.appendingPathComponent("store-\(UUID().uuidString)")
            let store = SQLiteStore(path: dir.appendingPathComponent("history.sqlite").path)
            return (store, { try? FileManager.default.removeItem(at: dir) })
        }
        let url = try PostgresTestDatabase.create()
        return (try PostgresStore(url: url.url), url.drop)
    }

    /// Runs `body` on a fresh store of `kind`, opened; closed and dropped after.
    static func withOpenStore(_ kind: String, _ body: (any HistoryStore) throws -> Void) throws {
        let (store, drop) = try fresh(kind)
        defer {
            store.close()
            drop()
        }
        try store.open()
        try body(store)
    }

    static func instance(_ id: String, at: Double = 1_000) -> InstanceRecord {
        InstanceRecord(
            id: id, url: "http://127.0.0.1:1/", version: "test", host: "h", pid: 1, startedAt: at, heartbeatAt: at)
    }

    static func event(
        _ seq: Int64, type: String = "perform", thread: String? = "t1", at: Double? = nil, data: String = "{}"
    )
        -> StoredEvent
    {
        StoredEvent(instance: "i1", boot: 1, seq: seq, at: at ?? Double(seq), type: type, thread: thread, data: data)
    }

    @Test(
        "a batch reads back through every filter and pages by cursor both ways (PostgreSQL)",
        .needsPostgres)
    func filtersAndPagesOnPostgres() throws { try filtersAndPages(kind: "postgres") }

    @Test("a batch reads back through every filter and pages by cursor both ways", arguments: ["sqlite"])
    func filtersAndPages(kind: String) throws {
        try Self.withOpenStore(kind) { store in
            _ = try store.register(Self.instance("i1"))
            var events = (1...25).map { Self.event(Int64($0), thread: $0 % 2 == 0 ? "t2" : "t1") }
            events.append(Self.event(26, type: "run-exit", thread: "t1", data: #"{"reason":"stopped"}"#))
            try store.write(StoreBatch(events: events, heartbeat: ("i1", 30, 100)))

            let newest = try store.events(HistoryQuery(limit: 5))
            #expect(newest.map(\.seq) == [26, 25, 24, 23, 22])
            #expect(newest[0].data == #"{"reason":"stopped"}"#)
            let older = try store.events(HistoryQuery(cursor: newest.last!.id, limit: 5))
            #expect(older.map(\.seq) == [21, 20, 19, 18, 17])
            let oldest = try store.events(HistoryQuery(limit: 3, ascending: true))
            #expect(oldest.map(\.seq) == [1, 2, 3])
            let next = try store.events(HistoryQuery(cursor: oldest.last!.id, limit: 3, ascending: true))
            #expect(next.map(\.seq) == [4, 5, 6])

            #expect(try store.events(HistoryQuery(thread: "t2", limit: 100)).count == 12)
            #expect(try store.events(HistoryQuery(types: ["run-exit"], limit: 100)).map(\.seq) == [26])
            #expect(try store.events(HistoryQuery(types: ["run-exit", "perform"], limit: 100)).count == 26)
            #expect(
                try store.events(HistoryQuery(since: 10, until: 15, limit: 100)).map(\.seq) == [14, 13, 12, 11, 10])
            #expect(try store.events(HistoryQuery(instance: "other", limit: 100)).isEmpty)
            // A resumed stream: this instance's events after a seq, oldest first.
            #expect(
                try store.events(HistoryQuery(instance: "i1", afterSeq: 23, limit: 100)).map(\.seq) == [24, 25, 26])
        }
    }

    @Test(
        "a perform and the request kept in its row read back as two events through every filter (PostgreSQL)",
        .needsPostgres)
    func foldedPairOnPostgres() throws { try foldedPair(kind: "postgres") }

    @Test(
        "a perform and the request kept in its row read back as two events through every filter",
        arguments: ["sqlite"])
    func foldedPair(kind: String) throws {
        try Self.withOpenStore(kind) { store in
            _ = try store.register(Self.instance("i1"))
            var perform = Self.event(2, at: 2, data: #"{"performId":"p1"}"#)
            perform.request = #"{"method":"POST","answer":{"ok":true}}"#
            perform.requestAt = 2.00004
            let events = [
                Self.event(1, type: "thread"), perform, Self.event(4, type: "run-exit", at: 4),
                Self.event(5, thread: "t2", at: 5),
            ]
            try store.write(StoreBatch(events: events, heartbeat: ("i1", 30, 0)))

            let newest = try store.events(HistoryQuery(limit: 10))
            #expect(newest.map(\.seq) == [5, 4, 3, 2, 1])
            #expect(newest.map(\.type) == ["perform", "run-exit", "request", "perform", "thread"])
            let request = newest[2]
            #expect(request.id == newest[3].id && request.thread == "t1" && request.at == 2.00004)
            #expect(request.data == #"{"method":"POST","answer":{"ok":true}}"#)
            #expect(newest.allSatisfy { $0.request == nil && $0.requestAt == nil })
            #expect(newest[3].data == #"{"performId":"p1"}"# && newest[3].at == 2)
            #expect(try store.events(HistoryQuery(limit: 10, ascending: true)).map(\.seq) == [1, 2, 3, 4, 5])
            // Four rows: a limit counts rows; a cursor passes the pair whole.
            #expect(try store.events(HistoryQuery(limit: 3, ascending: true)).map(\.seq) == [1, 2, 3, 4])
            let after = try store.events(HistoryQuery(cursor: request.id, limit: 10, ascending: true))
            #expect(after.map(\.seq) == [4, 5])
            // Each half answers to its own type.
            #expect(try store.events(HistoryQuery(types: ["request"], limit: 10)).map(\.seq) == [3])
            #expect(try store.events(HistoryQuery(types: ["perform"], limit: 10)).map(\.seq) == [5, 2])
            #expect(try store.events(HistoryQuery(types: ["request", "run-exit"], limit: 10)).map(\.seq) == [4, 3])
            #expect(try store.events(HistoryQuery(thread: "t2", types: ["request"], limit: 10)).isEmpty)
            #expect(try store.events(HistoryQuery(thread: "t1", limit: 10)).map(\.seq) == [4, 3, 2, 1])
            // Found by the perform's time.
            #expect(try store.events(HistoryQuery(since: 2, until: 3, limit: 10)).map(\.seq) == [3, 2])
            // A resumed stream (its types never include `request`): the perform alone.
            #expect(
                try store.events(HistoryQuery(instance: "i1", types: ["perform", "run-exit"], afterSeq: 1, limit: 10))
                    .map(\.seq) == [2, 4, 5])
            #expect(
                try store.events(HistoryQuery(instance: "i1", types: ["perform", "request"], afterSeq: 1, limit: 10))
                    .map(\.seq) == [2, 3, 5])

            // The next start's ids begin above a request kept in the last row.
            var last = Self.event(8, at: 8)
            last.request = "{}"
            last.requestAt = 8
            try store.write(StoreBatch(events: [last]))
            #expect(try store.register(Self.instance("i1")).firstSeq == 10)
            // Retention counts events: the row before `at` 3 and the pair.
            #expect(try store.prune(Retention(maxAge: 97, maxBytes: nil), now: 100) { false } == 3)
            #expect(try store.events(HistoryQuery(limit: 10, ascending: true)).map(\.seq) == [4, 5, 8, 9])
        }
    }

    @Test(
        "register counts starts, begins ids above the reserved ceiling and marks unended threads lost (PostgreSQL)",
        .needsPostgres)
    func registrationOnPostgres() throws { try registration(kind: "postgres") }

    @Test(
        "register counts starts, begins ids above the reserved ceiling and marks unended threads lost",
        arguments: ["sqlite"])
    func registration(kind: String) throws {
        try Self.withOpenStore(kind) { store in
            let first = try store.register(Self.instance("i1", at: 100))
            #expect(first.boot == 1)
            #expect(first.firstSeq == 1)
            #expect(first.previous == nil)
            try store.write(
                StoreBatch(
                    events: [Self.event(1), Self.event(2)],
                    threads: [
                        StoredThread(instance: "i1", boot: 1, thread: "t1", name: "a", style: "loop", createdAt: 101),
                        StoredThread(instance: "i1", boot: 1, thread: "t2", name: "b", style: "manual", createdAt: 102),
                        StoredThread(instance: "i1", boot: 1, thread: "t2", endedAt: 103, endedHow: "end_request"),
                    ], heartbeat: ("i1", 150, 2 + 100_000)))
            let second = try store.register(Self.instance("i1", at: 200))
            #expect(second.boot == 2)
            #expect(second.firstSeq == 100_003)
            #expect(second.previous?.heartbeatAt == 150)
            #expect(second.lostThreads.map(\.thread) == ["t1"])
            let threads = try store.threads(instance: "i1", boot: nil, limit: 10)
            let t1 = try #require(threads.first { $0.thread == "t1" })
            #expect(t1.endedHow == "lost")
            #expect(t1.endedAt == 150)
            #expect(t1.name == "a")
            let t2 = try #require(threads.first { $0.thread == "t2" })
            #expect(t2.endedHow == "end_request")
            #expect(t2.style == "manual")
            // A clean stop is remembered until the next start.
            try store.markStopped(instance: "i1", at: 300)
            #expect(try store.instances().first { $0.id == "i1" }?.stoppedAt == 300)
            let third = try store.register(Self.instance("i1", at: 400))
            #expect(third.previous?.stoppedAt == 300)
            #expect(third.lostThreads.isEmpty)
            #expect(try store.instances().first { $0.id == "i1" }?.stoppedAt == nil)
        }
    }

    @Test(
        "retention: by age the old events go; by size the oldest go first until the rest fits (PostgreSQL)",
        .needsPostgres)
    func retentionOnPostgres() throws { try retention(kind: "postgres") }

    @Test("retention: by age the old events go; by size the oldest go first until the rest fits", arguments: ["sqlite"])
    func retention(kind: String) throws {
        try Self.withOpenStore(kind) { store in
            _ = try store.register(Self.instance("i1"))
            let payload = #"{"pad":""# + String(repeating: "x", count: 2_000) + #""}"#
            // In batches of 100: a size prune never deletes the newest batch.
            for start in stride(from: 1, through: 1_000, by: 100) {
                try store.write(
                    StoreBatch(
                        events: (start..<(start + 100)).map { Self.event(Int64($0), at: Double($0), data: payload) }))
            }
            let removedByAge = try store.prune(Retention(maxAge: 500, maxBytes: nil), now: 1_000.5)
            #expect(removedByAge == 500)
            #expect(try store.events(HistoryQuery(limit: 1, ascending: true)).first?.seq == 501)

            let before = try store.size()
            #expect(before > 800_000)
            let limit = before / 2
            let removed = try store.prune(Retention(maxAge: nil, maxBytes: limit), now: 1_000)
            #expect(removed > 0)
            #expect(try store.size() <= limit)
            // The oldest went; the newest stayed.
            let left = try store.events(HistoryQuery(limit: 1_000, ascending: true))
            #expect(left.last?.seq == 1_000)
            #expect((left.first?.seq ?? 0) > 501)
            #expect(left.map(\.seq) == Array(left.first!.seq...1_000))
        }
    }

    @Test("SQLite: a prune told to yield stops after one step; the next calls go on until the file fits")
    func pruneYields() throws {
        try Self.withOpenStore("sqlite") { store in
            _ = try store.register(Self.instance("i1"))
            let sqlite = try #require(store as? SQLiteStore)
            let payload = #"{"pad":""# + String(repeating: "x", count: 2_000) + #""}"#
            // In batches of 100: a size prune never deletes the newest batch.
            for start in stride(from: 1, through: 1_000, by: 100) {
                try store.write(
                    StoreBatch(
                        events: (start..<(start + 100)).map { Self.event(Int64($0), at: Double($0), data: payload) }))
            }
            let limit = try store.size() * 3 / 4
            let retention = Retention(maxAge: nil, maxBytes: limit)
            #expect(sqlite.overLimit(retention))
            var asked = 0
            let first = try store.prune(retention, now: 1_000) {
                asked += 1
                return true
            }
            // The bound before the queue: steps until the data is under the
            // trigger (90 % of the limit), then the question, then back.
            #expect(asked == 1)
            #expect(first > 0, "\(first)")
            #expect(try store.size() <= limit * 9 / 10)
            #expect(try store.size() > limit * 6 / 10)
            var (removed, calls) = (first, 1)
            while sqlite.overLimit(retention), calls < 200 {
                removed += try store.prune(retention, now: 1_000) { true }
                calls += 1
            }
            #expect(!sqlite.overLimit(retention), "after \(calls) calls")
            #expect(calls >= 2)
            #expect(try store.size() <= limit)
            let left = try store.events(HistoryQuery(limit: 1_000, ascending: true))
            #expect(left.count == 1_000 - removed)
            #expect(left.map(\.seq) == Array((1_000 - Int64(left.count) + 1)...1_000))
        }
    }

    @Test("SQLite: WAL mode, the file passes integrity_check, and the folder is created")
    func sqliteFile() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("store-\(UUID().uuidString)/a/b")
        defer { try? FileManager.default.removeItem(at: dir.deletingLastPathComponent().deletingLastPathComponent()) }
        let path = dir.appendingPathComponent("history.sqlite").path
        let store = SQLiteStore(path: path)
        try store.open()
        _ = try store.register(Self.instance("i1"))
        try store.write(StoreBatch(events: [Self.event(1)]))
        store.close()
        let db = try DatabaseQueue.patient(path)
        #expect(try db.read { try String.fetchOne($0, sql: "PRAGMA journal_mode") } == "wal")
        #expect(try db.read { try String.fetchOne($0, sql: "PRAGMA integrity_check") } == "ok")
        #expect(try db.read { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM events") } == 1)
    }

    @Test("a store that cannot be opened says why")
    func unopenable() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("store-\(UUID().uuidString)")
        try Data("x".utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let store = SQLiteStore(path: file.path + "/sub/history.sqlite")
        #expect(throws: StoreError.self) { try store.open() }
        // libpq's sslmode values pass (TLS is libpq's); anything else is refused at start.
        for mode in PostgresStore.sslModes { _ = try PostgresStore(url: "postgres://u@h/db?sslmode=\(mode)") }
        #expect(throws: StoreError.self) { try PostgresStore(url: "postgres://u@h/db?sslmode=sometimes") }
        #expect(throws: StoreError.self) { try PostgresStore(url: "postgres://u@h/db?nonsense=1") }
        #expect(throws: StoreError.self) { try PostgresStore(url: "mysql://u@h/db") }
        #expect(PostgresStore.redact("postgres://u:secret@h:5/db") == "postgres://u:***@h:5/db")
        #expect(PostgresStore.redact("postgres://u:s@c@h1,h2:5/db") == "postgres://u:***@h1,h2:5/db")
        #expect(PostgresStore.redact("postgres://h/db?user=u&password=secret") == "postgres://h/db?user=u&password=***")
    }

    @Test("durations and sizes of the retention flags parse")
    func flagValues() {
        #expect(parseDuration("7d") == 604_800)
        #expect(parseDuration("12h") == 43_200)
        #expect(parseDuration("30m") == 1_800)
        #expect(parseDuration("250ms") == 0.25)
        #expect(parseDuration("45") == 45)
        #expect(parseDuration("x") == nil)
        #expect(parseDuration("-1d") == nil)
        #expect(parseByteSize("256MB") == 256_000_000)
        #expect(parseByteSize("1GiB") == 1_073_741_824)
        #expect(parseByteSize("512") == 512)
        #expect(parseByteSize("lots") == nil)
    }
}
