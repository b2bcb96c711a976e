import Foundation
import RunLoopCore
import RunLoopServer
import RunLoopTestSupport
import Testing

/// Issue 26, the server side: `GET /api/threads` in pages, and event streams
/// scoped to a summary (coalesced snapshots) plus the threads inspected.
@Suite("E2E: many threads: pages and scoped streams")
struct E2EScaleTests {
    private static func ids(_ response: TestHTTPResponse) -> [String] {
        response["threads"].items.compactMap { $0["id"].string }
    }

    @Test("GET /api/threads pages with limit and cursor; the cursor survives threads coming and going")
    func paging() async throws {
        try await ServerProcess.with(["--max-thread-page", "5"]) { server in
            let c = server.client
            var created: [String] = []
            for _ in 0..<7 { created.append(try await c.manualThread()) }
            // Without limit: every thread, the total, no cursor.
            let all = try await c.get("/api/threads")
            #expect(all.status == 200)
            #expect(Self.ids(all) == created)
            #expect(all["total"] == 7)
            #expect(all["nextCursor"] == .null)
            #expect(all["threads"].items.first?["load"] != .null)
            // Pages of 3: 3, 3, 1, with a cursor until the last.
            var seen: [String] = []
            var cursor: String?
            var pages = 0
            repeat {
                let page = try await c.get("/api/threads?limit=3" + (cursor.map { "&cursor=\($0)" } ?? ""))
                #expect(page.status == 200)
                #expect(page["total"] == 7)
                let ids = Self.ids(page)
                #expect(ids.count == (pages < 2 ? 3 : 1))
                seen += ids
                cursor = page["nextCursor"].string
                if let cursor { #expect(cursor == ids.last) }
                pages += 1
            } while cursor != nil && pages < 5
            #expect(seen == created)
            #expect(pages == 3)
            // A page ending exactly at the last thread has no next cursor.
            let exact = try await c.get("/api/threads?limit=5&cursor=\(created[1])")
            #expect(Self.ids(exact) == Array(created[2...]))
            #expect(exact["nextCursor"] == .null)
            // Threads created after a page was read follow on the next page;
            // a cursor whose thread is gone (ended, forgotten) still places the page.
            let first = try await c.get("/api/threads?limit=2")
            let next = try #require(first["nextCursor"].string)
            #expect(try await c.delete("/api/threads/\(created[1])").status == 200)
            let later = try await c.manualThread()
            let second = try await c.get("/api/threads?limit=5&cursor=\(next)")
            #expect(Self.ids(second) == Array(created[2..<7]))
            #expect(second["total"] == 8)
            let last = try await c.get("/api/threads?limit=5&cursor=\(try #require(second["nextCursor"].string))")
            #expect(Self.ids(last) == [later])
            #expect(last["nextCursor"] == .null)
            // A cursor past every thread: an empty last page.
            let beyond = try await c.get("/api/threads?limit=2&cursor=t999999")
            #expect(Self.ids(beyond).isEmpty)
            #expect(beyond["nextCursor"] == .null)
        }
    }

    @Test("GET /api/threads refuses a bad limit or cursor with 400 bad_value")
    func pagingBadInput() async throws {
        try await ServerProcess.with(["--max-thread-page", "5"]) { server in
            let c = server.client
            _ = try await c.manualThread()
            let bad: [(String, String)] = [
                ("limit=0", "limit"), ("limit=-1", "limit"), ("limit=abc", "limit"), ("limit=", "limit"),
                ("limit=6", "limit"), ("limit=1.5", "limit"), ("limit=99999999999999999999", "limit"),
                ("cursor=", "cursor"), ("cursor=x", "cursor"), ("cursor=t", "cursor"), ("cursor=t1x", "cursor"),
                ("limit=2&cursor=%00", "cursor"), ("cursor=tm3", "cursor"),
            ]
            try await Self.expectBadValues(c, "/api/threads", bad)
            // The bound is the flag's.
            #expect(try await c.get("/api/threads?limit=5").status == 200)
            let bound = try await c.get("/api/threads?limit=6")
            #expect(bound["error", "message"].string?.contains("--max-thread-page") == true)
        }
    }

    @Test("GET /api/events refuses a bad scope, inspect or types with 400 bad_value")
    func scopeBadInput() async throws {
        try await ServerProcess.with(["--stream-max-inspect", "2"]) { server in
            let c = server.client
            let bad: [(String, String)] = [
                ("scope=all", "scope"), ("scope=", "scope"), ("inspect=t1", "inspect"), ("types=turn", "types"),
                ("scope=summary&inspect=x", "inspect"), ("scope=summary&inspect=t1,,t2", "inspect"),
                ("scope=summary&inspect=t1,t2,t3", "inspect"), ("scope=summary&types=bogus", "types"),
                ("scope=summary&types=", "types"), ("scope=summary&types=turn,request", "types"),
            ]
            try await Self.expectBadValues(c, "/api/events", bad)
        }
    }

    /// Each of `bad` (a query and the field it gets wrong) on `path` is
    /// refused 400 bad_value, naming that field.
    private static func expectBadValues(
        _ c: E2EClient, _ path: String, _ bad: [(String, String)], sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        for (query, field) in bad {
            let response = try await c.get("\(path)?\(query)")
            #expect(response.status == 400, "\(query): \(response)", sourceLocation: sourceLocation)
            #expect(response["error", "code"] == "bad_value", "\(query)", sourceLocation: sourceLocation)
            #expect(response["error", "field"] == .string(field), "\(query)", sourceLocation: sourceLocation)
        }
    }

    /// The `snapshot` events a stream received so far.
    private static func snapshots(_ stream: EventStreamClient<Value>) -> [Value] {
        stream.state.value.events.filter { $0.name == "snapshot" }.map(\.data)
    }

    /// Milliseconds since 1970 of a snapshot's `at`.
    private static func millis(_ snapshot: Value) -> Double {
        (snapshot["at"].string.flatMap { Timestamp.parse($0) }?.timeIntervalSince1970 ?? 0) * 1000
    }

    @Test(
        "a summary stream gets coalesced snapshots (all rows first), only the inspected thread's events, every warning")
    func summaryStream() async throws {
        try await ServerProcess.with(["--stream-snapshot-ms", "200"]) { server in
            let c = server.client
            var threads: [String] = []
            for _ in 0..<3 {
                let t = try await c.createThread(["run": ["style": "loop"]])
                #expect(try await c.post("/api/threads/\(t)/timers", ["interval": 0.01]).status == 201)
                threads.append(t)
            }
            let stream = try EventStreamClient<Value>(
                port: server.port, path: "/api/events?scope=summary&inspect=\(threads[1])&types=timer,warning")
            defer { stream.disconnect() }
            let hello = try #require(stream.next(timeout: 10) { $0.name == "hello" })
            #expect(hello.data["scope"] == "summary")
            #expect(hello.data["threads"] == [])
            #expect(hello.data["snapshotMs"] == 200)
            // The first snapshot carries every thread, with the summary.
            let first = try #require(stream.next(timeout: 10) { $0.name == "snapshot" }).data
            #expect(Set(first["rows"].items.compactMap { $0["id"].string }) == Set(threads))
            #expect(first["summary", "threads"] == 3)
            #expect(first["removed"] == [])
            for row in first["rows"].items {
                #expect(row["busyPercent"].number != nil)
                #expect(row["wakeupsPerSecond"].number != nil)
                #expect(row["load"] != .null)
                #expect(row["warnings"].items.allSatisfy { $0["code"] != "mode_misnamed" })
            }
            // A warning on a thread not inspected still flows.
            #expect(
                try await c.post("/api/threads/\(threads[2])/timers", ["interval": 1, "mode": "defualt"]).status == 201)
            let warning = try #require(
                stream.next(timeout: 10) { $0.name == "warning" && $0.data["code"] == "mode_misnamed" })
            #expect(warning.data["thread"] == .string(threads[2]))
            // Six more snapshots: each timer fired ~100 times a second meanwhile.
            #expect(stream.state.wait(timeout: 20) { $0.events.filter { $0.name == "snapshot" }.count >= 7 })
            let snapshots = Self.snapshots(stream)
            let times = snapshots.map(Self.millis)
            for (earlier, later) in zip(times, times.dropFirst()) {
                // At most one per interval (the server's clock, each rounded to the millisecond).
                #expect(later - earlier >= 198, "\(times)")
            }
            let events = stream.state.value.events
            let timers = events.filter { $0.name == "timer" }
            #expect(!timers.isEmpty)
            #expect(timers.allSatisfy { $0.data["thread"] == .string(threads[1]) })
            // Types outside the list and other threads' events do not flow.
            #expect(!events.contains { ["turn", "activity", "timer-mode", "thread"].contains($0.name) })
            // Coalesced: far fewer snapshots than the loops' turns, and a busy loop's
            // rows show its wake-ups; the warned thread's row carries its warning.
            let later = snapshots.dropFirst()
            let rows = later.flatMap { $0["rows"].items }
            #expect(rows.contains { $0["id"] == .string(threads[0]) && ($0["wakeupsPerSecond"].number ?? 0) > 0 })
            #expect(
                rows.contains {
                    $0["id"] == .string(threads[2])
                        && $0["warnings"].items.contains { $0["code"] == "mode_misnamed" }
                })
            let last = try #require(snapshots.last)
            #expect(last["summary", "warningsByCode", "mode_misnamed"] == 1)
            #expect(last["summary", "byState"].object?.values.compactMap(\.number).reduce(0, +) == 3)
            #expect(!last["summary", "busiest"].items.isEmpty)
            let fires = try await c.get("/api/threads/\(threads[0])/timers")["timers"].items.first?["fires"].number
            #expect((fires ?? 0) > Double(snapshots.count) * 3, "fires \(fires ?? 0), snapshots \(snapshots.count)")
        }
    }

    @Test("a quiet summary stream gets no snapshot until something changes; a plain stream is unchanged")
    func quietAndPlain() async throws {
        try await ServerProcess.with(["--stream-snapshot-ms", "50"]) { server in
            let c = server.client
            let t = try await c.manualThread()
            let plain = try EventStreamClient<Value>(port: server.port)
            defer { plain.disconnect() }
            let hello = try #require(plain.next(timeout: 10) { $0.name == "hello" })
            #expect(hello.data["threads"].items.compactMap { $0["id"].string } == [t])
            #expect(hello.data["scope"] == .null)
            let summary = try EventStreamClient<Value>(port: server.port, path: "/api/events?scope=summary")
            defer { summary.disconnect() }
            #expect(summary.next(timeout: 10) { $0.name == "snapshot" } != nil)
            // Something changes: one more snapshot with only that thread's row.
            let other = try await c.manualThread()
            let changed = try #require(
                summary.next(timeout: 10) { event in
                    event.name == "snapshot" && event.data["rows"].items.contains { $0["id"] == .string(other) }
                })
            // Only what changed (the first thread, idle, has no row to repeat).
            #expect(changed.data["rows"].items.compactMap { $0["id"].string }.contains(t) == false)
            #expect(changed.data["summary", "threads"] == 2)
            // The plain stream saw the thread event itself; the summary stream did not.
            #expect(plain.next(timeout: 10) { $0.name == "thread" && $0.data["thread"] == .string(other) } != nil)
            #expect(!summary.state.value.events.contains { $0.name == "thread" })
        }
    }

    @Test("Last-Event-ID on a summary stream replays only the inspected thread's kept events and the warnings")
    func summaryResume() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let inspected = try await c.createThread(["run": ["style": "loop"]])
            let other = try await c.createThread(["run": ["style": "loop"]])
            let path = "/api/events?scope=summary&inspect=\(inspected)&types=perform,warning"
            let stream = try EventStreamClient<Value>(port: server.port, path: path)
            func perform(_ thread: String, _ n: Int) async throws {
                #expect(try await c.echo(on: thread, n).status == 200)
            }
            try await perform(inspected, 0)
            try await perform(other, 0)
            let seen = try #require(stream.next(timeout: 10) { $0.name == "perform" })
            #expect(seen.data["thread"] == .string(inspected))
            let lastId = try #require(seen.id)
            stream.disconnect()
            // Missed while disconnected: performs on both, a warning on the other.
            for n in 1...3 {
                try await perform(inspected, n)
                try await perform(other, n)
            }
            #expect(try await c.post("/api/threads/\(other)/timers", ["interval": 1, "mode": "defualt"]).status == 201)
            let resumed = try EventStreamClient<Value>(
                port: server.port, path: path, headers: [("Last-Event-ID", lastId)]
            ) { (try? JSON.parse(Array($0.utf8))) ?? .null }
            defer { resumed.disconnect() }
            let marker = try #require(resumed.next(timeout: 15) { $0.name == "resumed" })
            #expect(marker.data["lastEventId"].number == Double(lastId))
            let before = resumed.state.value.events.prefix { $0.name != "resumed" }
            let performs = before.filter { $0.name == "perform" }
            #expect(performs.map { $0.data["result", "n"] } == [1, 2, 3])
            #expect(performs.allSatisfy { $0.data["thread"] == .string(inspected) })
            #expect(before.contains { $0.name == "warning" && $0.data["thread"] == .string(other) })
            #expect(!before.contains { $0.name == "snapshot" || $0.name == "thread" })
            let ids = before.compactMap { $0.id.flatMap { Int64($0) } }
            #expect(ids == ids.sorted())
            #expect(ids.allSatisfy { $0 > Int64(lastId)! })
            // Then a snapshot of every thread, then live events.
            let full = try #require(resumed.next(timeout: 10) { $0.name == "snapshot" })
            #expect(Set(full.data["rows"].items.compactMap { $0["id"].string }) == [inspected, other])
            try await perform(other, 9)
            try await perform(inspected, 9)
            let live = try #require(resumed.next(timeout: 10) { $0.name == "perform" && $0.data["result", "n"] == 9 })
            #expect(live.data["thread"] == .string(inspected))
            #expect(Int64(live.id ?? "0")! > (ids.max() ?? 0))
        }
    }
}
