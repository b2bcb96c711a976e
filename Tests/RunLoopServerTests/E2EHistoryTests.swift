import CLinux
import Foundation
import GRDB
import MicroHTTP
import Primitives
import RunLoopCore
import RunLoopServer
import RunLoopStore
import RunLoopTestSupport
import Testing

/// Issue 15 end to end: the real binary with its SQLite store in a temporary
/// folder (or the test PostgreSQL), restarted cleanly and with `kill -9`,
/// resumed by `Last-Event-ID`, and with its store failing and coming back.
@Suite("E2E history store")
struct E2EHistoryTests {
    static func folder() throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("rl-history-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir
    }

    /// Requests from background threads until stopped: `perform` echo with
    /// wait on `thread`; counts the answers by status.
    final class Load: Sendable {
        let statuses = Locked([Int: Int]())
        private let running = Locked(true)
        private let done = Locked(0)
        let workers: Int

        init(
            port: UInt16, thread: String, workers: Int = 3,
            body: String = #"{"selector":"echo","args":{"n":1},"waitUntilDone":true}"#
        ) {
            self.workers = workers
            let client = E2EClient(port: port)
            for _ in 0..<workers {
                Thread.detachNewThread { [self] in
                    while running.withLock({ $0 }) {
                        let status =
                            (try? client.sendBlocking(
                                "POST", "/api/threads/\(thread)/perform", body: Array(body.utf8),
                                contentType: "application/json", timeout: 10
                            ).status) ?? -1
                        statuses.withLock { $0[status, default: 0] += 1 }
                    }
                    done.withLock { $0 += 1 }
                    done.notifyAll()
                }
            }
        }

        /// Stops and waits for every worker's last request.
        /// Ends the load and waits (off the cooperative pool) for its workers; the statuses seen.
        func stop() async -> [Int: Int] {
            await offThePool { [self] in
                running.withLock { $0 = false }
                done.withLock(when: { $0 == workers }, timeout: 30) { _, _ in }
                return statuses.withLock { $0 }
            }
        }
    }

    /// The events in the rows of `events` (SQL): a row, the request kept in
    /// it, and two for each pair packed before its last (docs/history.md).
    static let eventsInRows = "COUNT(*) + COUNT(request) + 2 * COALESCE(SUM(id - first_id), 0)"
    /// The performs kept with their requests (SQL): one per pair, packed or not.
    static let pairsInRows = "COUNT(request) + COALESCE(SUM(id - first_id), 0)"

    /// One value from the SQLite file (synchronous: GRDB's async reads are not wanted here).
    static func sqlite<T: DatabaseValueConvertible & StatementColumnConvertible>(
        _ path: String, _ sql: String, as type: T.Type = T.self
    ) throws -> T? {
        let db = try DatabaseQueue.patient(path)
        defer { try? db.close() }
        return try db.read { try T.fetchOne($0, sql: sql) }
    }

    @Test("a clean restart keeps the history; ended threads show how they ended; the new start counts as boot 2")
    func cleanRestart() async throws {
        let dir = try Self.folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let args = ["--data-dir", dir.path, "--instance-id", "clean"]
        var server = try await ServerProcess.started(args)
        var c = server.client
        let loop = try await c.createThread(["run": ["style": "loop"]])
        for n in 1...3 {
            #expect(try await c.echo(on: loop, n).status == 200)
        }
        let manual = try await c.manualThread()
        #expect(try await c.delete("/api/threads/\(manual)").status == 200)
        await server.stopped()
        #expect(server.log.contains("history store open"))

        server = try await ServerProcess.started(args)
        defer { server.stop() }
        c = server.client
        let threads = try await c.get("/api/history/threads?instance=clean&boot=1")
        #expect(threads.status == 200)
        let rows = threads["threads"].items
        let loopRow = try #require(rows.first { $0["thread"] == .string(loop) })
        #expect(loopRow["endedHow"] == "service_stopping")
        #expect(loopRow["lastExit", "cause", "code"] == "service_stopping")
        #expect(loopRow["live"] == false)
        #expect(loopRow["final", "runs"].number != nil)
        let manualRow = try #require(rows.first { $0["thread"] == .string(manual) })
        #expect(manualRow["endedHow"] == "thread_ending")
        #expect(manualRow["endedHow"] != "lost")

        let performs = try await c.get("/api/history?instance=clean&type=perform&order=asc")
        #expect(performs["events"].items.map { $0["data", "result", "n"] } == [1, 2, 3])
        #expect(performs["events"].items.allSatisfy { $0["boot"] == 1 && $0["thread"] == .string(loop) })
        // Each perform and the request that answered it share one row when
        // the request came at most 0.1 s after it (docs/history.md): history
        // gives both; a page never splits them. On a busy machine a request
        // may come later and keep a row of its own, so which pairs share a
        // row is judged by their own times (to the millisecond they show).
        let answered = "/api/history?instance=clean&thread=\(loop)&type=perform,request&order=asc"
        let pairs = try await c.get(answered)["events"].items
        #expect(pairs.map { $0["event"] } == ["perform", "request", "perform", "request", "perform", "request"])
        let every = try await c.get("/api/history?instance=clean&order=asc&limit=500")
        #expect(every.status == 200 && every["next"] == .null)
        let ids = every["events"].items.compactMap { $0["id"].number }
        var folded = 0
        for pair in stride(from: 0, to: pairs.count - 1, by: 2) {
            let (perform, request) = (pairs[pair], pairs[pair + 1])
            let shared = perform["cursor"] == request["cursor"]
            folded += shared ? 1 : 0
            let at = { (event: Value) in event["at"].string.flatMap(E2EStoreOperationsTests.seconds) }
            let gap = try #require(at(request)) - #require(at(perform))
            // Another event (a stall warning on a busy machine) may take the
            // id between them: the request then keeps a row of its own too.
            let (first, last) = (try #require(perform["id"].number), try #require(request["id"].number))
            let next = last == first + 1
            #expect(next || ids.contains { $0 > first && $0 < last }, "no event between ids \(first) and \(last)")
            if next && gap < StoredEvent.foldWindow - 0.002 { #expect(shared, "a request \(gap) s after its perform") }
            if !next || gap > StoredEvent.foldWindow + 0.002 {
                #expect(!shared, "ids \(perform["id"]), \(request["id"]); \(gap) s")
            }
            #expect(request["data", "answer", "result", "n"] == perform["data", "result", "n"])
            // The answer as sent: the perform's payload but its `at`, whether or
            // not the row left it out (docs/history.md).
            var payload = perform["data"].object ?? [:]
            payload["at"] = nil
            #expect(request["data", "answer"] == .object(payload))
            #expect(request["data", "path"] == .string("/api/threads/\(loop)/perform"))
        }
        var walked: [Value] = []
        var next: Value = .null
        var pages = 0
        repeat {
            let cursor = next.string.map { "&cursor=\($0)" } ?? ""
            let page = try await c.get(answered + "&limit=1" + cursor)
            let events = page["events"].items
            // One row a page: one event, or a pair with one cursor.
            #expect(Set(events.map { $0["cursor"] }).count == 1)
            #expect(page["count"].number == Double(events.count))
            walked += events
            next = page["next"]
            pages += 1
        } while next != .null && pages < 10
        #expect(walked == pairs)
        let path = dir.appendingPathComponent("history.sqlite").path
        // A page per pair kept in one row (packed with others or not), and per request kept alone.
        let kept = try Self.sqlite(path, "SELECT \(Self.pairsInRows) FROM events", as: Int.self) ?? 0
        #expect(pages == 6 - kept)
        #expect(kept == folded)
        // A kept request leaves out the answer its perform's payload repeats.
        let keptRows = try Self.sqlite(path, "SELECT COUNT(*) FROM events WHERE request IS NOT NULL", as: Int.self) ?? 0
        let compacted =
            try Self.sqlite(path, #"SELECT COUNT(*) FROM events WHERE request LIKE '%"answer":'"#, as: Int.self) ?? 0
        #expect(compacted == keptRows)
        let started = try await c.get("/api/history?type=instance&limit=1")
        #expect(started["events"].items.first?["data", "boot"] == 2)
        #expect(started["events"].items.first?["data", "previousEnd"] == "stopped")
        let fleet = try await c.get("/api/fleet")
        #expect(fleet["instances"].items.first?["boot"] == 2)
        #expect(fleet["store"] == "sqlite")
    }

    @Test(
        "kill -9 under load: the file opens, integrity_check is ok, every committed event is there, the thread is lost")
    func killNine() async throws {
        let dir = try Self.folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let args = ["--data-dir", dir.path, "--instance-id", "crash", "--log-level", "warning"]
        var server = try await ServerProcess.started(args)
        var c = server.client
        let loop = try await c.createThread(["run": ["style": "loop"]])
        let load = Load(port: server.port, thread: loop)
        // Hundreds of events per second: wait until 600 are committed.
        let store = try await c.poll("/api/store", timeout: 60) { ($0["written"].number ?? 0) >= 600 }
        let committed = Int(store["written"].number ?? 0)
        server.send(signal: SIGKILL)
        #expect(await server.exited(timeout: ServerProcess.startTimeout) != nil)
        let statuses = await load.stop()
        #expect(statuses.keys.contains(200))

        let file = dir.appendingPathComponent("history.sqlite").path
        #expect(try Self.sqlite(file, "PRAGMA integrity_check", as: String.self) == "ok")
        // Events: rows, and the requests kept in their performs' rows.
        let kept =
            try Self.sqlite(file, "SELECT \(Self.eventsInRows) FROM events WHERE boot = 1", as: Int.self) ?? 0
        #expect(kept >= committed)
        let lastSeq =
            try Self.sqlite(file, "SELECT MAX(seq + (request IS NOT NULL)) FROM events", as: Int64.self) ?? 0

        server = try await ServerProcess.started(args)
        defer { server.stop() }
        c = server.client
        let row = try await c.get("/api/history/threads?instance=crash&boot=1")["threads"].items.first {
            $0["thread"] == .string(loop)
        }
        #expect(row?["endedHow"] == "lost")
        #expect(row?["endedAt"].string != nil)
        let started = try await c.get("/api/history?type=instance&limit=1")["events"].items.first
        #expect(started?["data", "previousEnd"] == "lost")
        #expect(started?["data", "lostThreads"].items.contains(.string("\(loop) (boot 1)")) == true)
        // The restart says so in the log too, at warning.
        #expect(
            await server.logged(timeout: 10) {
                $0.split(separator: "\n").contains { line in
                    line.contains(" warning ") && line.contains("lost by a previous boot")
                        && line.contains("\(loop) (boot 1)")
                }
            }, "\(server.log)")
        // Ids of the new start are above everything the killed one sent.
        #expect((started?["id"].number ?? 0) > Double(lastSeq))
    }

    @Test("Last-Event-ID resumes a stream across a restart (SIGINT flushes): missed events, then resumed, then live")
    func resumeAcrossRestart() async throws {
        let dir = try Self.folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        try await Self.resumesAcrossRestart(["--data-dir", dir.path])
    }

    @Test(
        "Last-Event-ID resumes a stream across a restart with PostgreSQL (the same instance id)",
        .enabled(if: hasPostgres, "needs RUNLOOPD_TEST_POSTGRES_URL (scripts/with-postgres.sh)"))
    func resumeAcrossRestartOnPostgres() async throws {
        let database = try PostgresTestDatabase.create()
        defer { database.drop() }
        try await Self.resumesAcrossRestart(["--store", database.url, "--instance-id", "resume"])
    }

    /// A stream's `Last-Event-ID` after a SIGINT and a start with `args` again:
    /// the missed events, then `resumed`, then live ones with higher ids.
    static func resumesAcrossRestart(_ args: [String]) async throws {
        var server = try await ServerProcess.started(args)
        var c = server.client
        let loop = try await c.createThread(["run": ["style": "loop"]])
        let stream = try EventStreamClient<Value>(port: server.port)
        #expect(
            try await c.post("/api/threads/\(loop)/perform", ["selector": "echo", "waitUntilDone": true]).status == 200)
        let seen = try #require(stream.next(timeout: 10) { $0.name == "perform" })
        let lastId = try #require(seen.id)
        stream.disconnect()
        // Missed while disconnected.
        for n in 1...3 {
            #expect(try await c.echo(on: loop, n).status == 200)
        }
        server.send(signal: SIGINT)
        #expect(await server.exited(timeout: ServerProcess.startTimeout) == 0)
        await server.stopped()

        server = try await ServerProcess.started(args)
        defer { server.stop() }
        c = server.client
        let resumed = try EventStreamClient<Value>(
            port: server.port, path: "/api/events", headers: [("Last-Event-ID", lastId)]
        ) { (try? JSON.parse(Array($0.utf8))) ?? .null }
        defer { resumed.disconnect() }
        let marker = try #require(resumed.next(timeout: 15) { $0.name == "resumed" })
        #expect(marker.data["lastEventId"].number == Double(lastId))
        #expect((marker.data["replayed"].number ?? 0) >= 4)
        let before = resumed.state.value.events.prefix { $0.name != "resumed" }
        let missed = before.filter { $0.name == "perform" }
        #expect(missed.map { $0.data["result", "n"] } == [1, 2, 3])
        let ids = before.compactMap { $0.id.flatMap { Int64($0) } }
        #expect(ids == ids.sorted())
        #expect(ids.allSatisfy { $0 > Int64(lastId)! })
        // The loop thread's end at SIGINT was kept too.
        #expect(before.contains { $0.name == "thread" && $0.data["change"] == "exited" })
        // Then live, with ids above the replayed ones.
        _ = try await c.createThread(["run": ["style": "loop"]])
        let live = try #require(resumed.next(timeout: 10) { $0.name == "thread" && $0.data["change"] == "created" })
        #expect(Int64(live.id ?? "0")! > (ids.max() ?? 0))
    }
}
