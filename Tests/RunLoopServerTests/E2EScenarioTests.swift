import Foundation
import RunLoopCore
import Testing
import RunLoopTestSupport

/// The run-loop behaviours of docs/concepts.md (exit reasons, stops, modes,
/// performs, the task queue, what CF on Linux does), over HTTP against the real binary.
@Suite("E2E run-loop scenarios")
struct E2EScenarioTests {
    @Test("an empty loop finishes at once")
    func emptyLoopFinishes() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.manualThread(keepAlive: "none")
            let run = try await c.post("/api/threads/\(t)/run", ["seconds": 5])
            #expect(run.status == 200)
            #expect(run["exitReason"] == "finished")
            #expect(run["code"] == 1)
            #expect(run["mode"] == "default")
            #expect((run["durationMs"].number ?? 1e9) < 1000)
            let thread = try await c.get("/api/threads/\(t)")
            #expect(thread["runs"] == 1)
            #expect(thread["exits", "finished"] == 1)
            #expect(thread["lastExit", "exitReason"] == "finished")
        }
    }

    @Test("a kept-alive loop times out")
    func timeout() async throws {
        try await ServerProcess.withManualThread { c, t in
            let run = try await c.post("/api/threads/\(t)/run", ["seconds": 0.1])
            #expect(run.status == 200)
            #expect(run["exitReason"] == "timedOut")
            #expect(run["code"] == 3)
            #expect((run["durationMs"].number ?? 0) >= 90)
        }
    }

    @Test("stop ends a manual run with stopped")
    func stop() async throws {
        try await ServerProcess.withManualThread { c, t in
            async let run = c.post("/api/threads/\(t)/run", ["seconds": 20])
            try await c.waitUntilWaiting(t)
            let stop = try await c.post("/api/threads/\(t)/stop")
            #expect(stop.status == 200)
            #expect(stop["exitReason"] == "stopped")
            #expect(stop["code"] == 2)
            let ran = try await run
            #expect(ran["exitReason"] == "stopped")
            // Ended by the stop, before its 20 s (reaching "waiting" can take
            // seconds under ThreadSanitizer with the whole suite in parallel).
            #expect((ran["durationMs"].number ?? 1e9) < 19_000)
        }
    }

    @Test("a signal with wake-up is handled at once (handledSource)")
    func signalWithWakeUp() async throws {
        try await ServerProcess.withManualThread { c, t in
            let source = try await c.post("/api/threads/\(t)/sources", ["kind": "custom"])
            let s = try #require(source["id"].string)
            async let run = c.post("/api/threads/\(t)/run", ["seconds": 20, "returnAfterSourceHandled": true])
            try await c.waitUntilWaiting(t)
            let signal = try await c.post("/api/threads/\(t)/sources/\(s)/signal", ["wakeup": true])
            #expect(signal.status == 200)
            #expect(signal["wakeup"] == true)
            let ran = try await run
            #expect(ran["exitReason"] == "handledSource")
            #expect(ran["code"] == 4)
            // Before the 20 s run could time out (under ThreadSanitizer with the whole
            // suite in parallel, the wait and the signal alone took 14 s once).
            #expect((ran["durationMs"].number ?? 1e9) < 19_000)
            let after = try await c.get("/api/threads/\(t)/sources/\(s)")
            #expect(after["fired"] == 1)
        }
    }

    @Test("a signal without wake-up waits: timedOut, then the next run handles it")
    func signalWithoutWakeUp() async throws {
        try await ServerProcess.withManualThread { c, t in
            let source = try await c.post("/api/threads/\(t)/sources", ["kind": "custom"])
            let s = try #require(source["id"].string)
            // 6 s: room to see the loop asleep before the run times out, even on a
            // loaded machine or under ThreadSanitizer with the whole suite in
            // parallel (3 s was once not enough there).
            async let run = c.post("/api/threads/\(t)/run", ["seconds": 6, "returnAfterSourceHandled": true])
            try await c.waitUntilWaiting(t)
            let signal = try await c.post("/api/threads/\(t)/sources/\(s)/signal", ["wakeup": false])
            #expect(signal["signalled"] == true)
            let first = try await run
            #expect(first["exitReason"] == "timedOut")
            #expect(try await c.get("/api/threads/\(t)/sources/\(s)")["fired"] == 0)
            let second = try await c.post("/api/threads/\(t)/run", ["seconds": 5, "returnAfterSourceHandled": true])
            #expect(second["exitReason"] == "handledSource")
            #expect((second["durationMs"].number ?? 1e9) < 1000)
            #expect(try await c.get("/api/threads/\(t)/sources/\(s)")["fired"] == 1)
        }
    }

    @Test("a timer with maxFires 2 is invalidated, then the empty mode finishes")
    func timerMaxFires() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.manualThread(keepAlive: "none")
            let timer = try await c.post("/api/threads/\(t)/timers", ["interval": 0.02, "maxFires": 2])
            #expect(timer.status == 201)
            let tm = try #require(timer["id"].string)
            let run = try await c.post("/api/threads/\(t)/run", ["seconds": 10])
            #expect(run["exitReason"] == "finished")
            let after = try await c.get("/api/threads/\(t)/timers/\(tm)")
            #expect(after["fires"] == 2)
            #expect(after["valid"] == false)
            #expect(after["nextFireAt"] == .null)
        }
    }

    @Test("a timer in another mode is silent; it fires when the loop runs in its mode")
    func modeFiltering() async throws {
        try await ServerProcess.withManualThread { c, t in
            let timer = try await c.post("/api/threads/\(t)/timers", ["interval": 0.01, "mode": "quiet"])
            let tm = try #require(timer["id"].string)
            #expect(timer["mode"] == "quiet")
            let inDefault = try await c.post("/api/threads/\(t)/run", ["seconds": 0.15])
            #expect(inDefault["exitReason"] == "timedOut")
            #expect(try await c.get("/api/threads/\(t)/timers/\(tm)")["fires"] == 0)
            let inQuiet = try await c.post("/api/threads/\(t)/run", ["seconds": 0.15, "mode": "quiet"])
            #expect(inQuiet["exitReason"] == "timedOut")
            #expect(inQuiet["mode"] == "quiet")
            #expect((try await c.get("/api/threads/\(t)/timers/\(tm)")["fires"].number ?? 0) >= 1)
        }
    }

    @Test("an item in common modes works in a mode added to the common set")
    func commonModes() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.manualThread(keepAlive: "none")
            let modes = try await c.post("/api/threads/\(t)/modes/common", ["mode": "mine"])
            #expect(modes.status == 200)
            #expect(modes["common"].items.contains("mine"))
            let timer = try await c.post(
                "/api/threads/\(t)/timers", ["interval": 0.02, "mode": "common", "maxFires": 1])
            let tm = try #require(timer["id"].string)
            let run = try await c.post("/api/threads/\(t)/run", ["seconds": 10, "mode": "mine"])
            #expect(run["exitReason"] == "finished")
            #expect(run["mode"] == "mine")
            #expect(try await c.get("/api/threads/\(t)/timers/\(tm)")["fires"] == 1)
            let all = try await c.get("/api/threads/\(t)/modes")
            #expect(all["common"].items.contains("default"))
        }
    }

    @Test(
        "a perform whose wait passes on an idle manual thread: 202 with where to follow it, listed pending, runs on the next run"
    )
    func performToIdleThread() async throws {
        try await ServerProcess.withManualThread { c, t in
            let wait = try await c.post(
                "/api/threads/\(t)/perform",
                ["selector": "count", "args": ["name": "hits"], "waitUntilDone": true, "timeout": 0.2])
            // Nothing failed: the perform was accepted and stays queued (not a 5xx).
            #expect(wait.status == 202)
            #expect(wait["state"] == "pending")
            let performId = try #require(wait["performId"].string)
            #expect(wait["follow"] == .string("/api/threads/\(t)/performs/\(performId)"))
            #expect(try await c.get("/api/threads/\(t)/performs/\(performId)")["state"] == "pending")
            let thread = try await c.get("/api/threads/\(t)")
            #expect(thread["counts", "pendingPerforms"] == 1)
            #expect(thread["pendingPerforms"].items.first?["selector"] == "count")
            let pending = try await c.get("/api/threads/\(t)/perform")
            #expect(pending["pending"].items.count == 1)
            let run = try await c.post("/api/threads/\(t)/run", ["seconds": 5, "returnAfterSourceHandled": true])
            #expect(run["exitReason"] == "handledSource")
            let log = try await c.get("/api/threads/\(t)/log")
            #expect(log["counters", "hits"] == 1)
            #expect(try await c.get("/api/threads/\(t)/perform")["pending"].items.isEmpty)
            let done = try await c.get("/api/threads/\(t)/performs/\(performId)")
            #expect(done["state"] == "done")
            #expect(done["result", "value"] == 1)
        }
    }

    @Test("a loop-style thread re-enters after a stop (runs keep rising)")
    func loopReentersAfterStop() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.createThread(["run": ["style": "loop", "seconds": 30]])
            try await c.waitUntilWaiting(t)
            let first = try await c.post("/api/threads/\(t)/stop")
            #expect(first.status == 200)
            #expect(first["exitReason"] == "stopped")
            try await c.waitUntilWaiting(t)
            let second = try await c.post("/api/threads/\(t)/stop")
            #expect(second["exitReason"] == "stopped")
            #expect((second["run"].number ?? 0) > (first["run"].number ?? 0))
            let thread = try await c.get("/api/threads/\(t)")
            #expect(thread["exits", "stopped"] == 2)
            #expect(thread["state"] != "exited")
        }
    }

    @Test("a forever-style thread ends after a stop")
    func foreverEndsAfterStop() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.createThread(["run": ["style": "forever"]])
            try await c.waitUntilWaiting(t)
            let stop = try await c.post("/api/threads/\(t)/stop")
            #expect(stop["exitReason"] == "stopped")
            let ended = try await c.poll("/api/threads/\(t)") { $0["state"] == "exited" }
            #expect(ended["endedAt"].string != nil)
            #expect(ended["lastExit", "exitReason"] == "stopped")
        }
    }

    @Test("the idle task queue holds 10; the 11th is refused; tasks run one per turn")
    func taskQueueCapacity() async throws {
        try await ServerProcess.withManualThread { c, t in
            for i in 1...10 {
                let added = try await c.post(
                    "/api/threads/\(t)/tasks", ["id": .string("k\(i)"), "selector": "count", "args": ["name": "tasks"]])
                #expect(added.status == 201)
                #expect(added["count"] == .number(Double(i)))
            }
            let full = try await c.post("/api/threads/\(t)/tasks", ["id": "k11", "selector": "count"])
            #expect(full.status == 429)
            #expect(full["error", "code"] == "queue_full")
            let queue = try await c.get("/api/threads/\(t)/tasks")
            #expect(queue["capacity"] == 10)
            #expect(queue["tasks"].items.count == 10)
            let run = try await c.post("/api/threads/\(t)/run", ["seconds": 1])
            #expect(run["exitReason"] == "timedOut")
            let done = try await c.get("/api/threads/\(t)/tasks")
            #expect(done["done"] == 10)
            #expect(done["count"] == 0)
            #expect(try await c.get("/api/threads/\(t)/log")["counters", "tasks"] == 10)
        }
    }

    @Test("observer order for one turn that handles a pre-signalled source")
    func observerOrder() async throws {
        try await ServerProcess.withManualThread { c, t in
            let observer = try await c.post("/api/threads/\(t)/observers", ["activities": "all"])
            #expect(observer.status == 201)
            let source = try await c.post("/api/threads/\(t)/sources", ["kind": "custom"])
            let s = try #require(source["id"].string)
            _ = try await c.post("/api/threads/\(t)/sources/\(s)/signal", ["wakeup": false])
            let run = try await c.post("/api/threads/\(t)/run", ["seconds": 5, "returnAfterSourceHandled": true])
            #expect(run["exitReason"] == "handledSource")
            let activity = try await c.get("/api/threads/\(t)/activity")
            let names = activity["activity"].items.compactMap { $0["activity"].string }
            #expect(names == ["entry", "beforeTimers", "beforeSources", "exit"])
            let since = try #require(activity["activity"].items.first?["seq"].number)
            let later = try await c.get("/api/threads/\(t)/activity?since=\(Int(since))")
            #expect(later["activity"].items.count == 3)
        }
    }

    @Test("a port message travels between threads through the send selector")
    func portMessageBetweenThreads() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let receiver = try await c.manualThread(keepAlive: "none")
            let port = try await c.post("/api/threads/\(receiver)/sources", ["kind": "port"])
            let s = try #require(port["id"].string)
            let sender = try await c.createThread()
            let sent = try await c.post(
                "/api/threads/\(sender)/perform",
                [
                    "selector": "send", "waitUntilDone": true,
                    "args": ["thread": .string(receiver), "source": .string(s), "msgid": 7, "data": "hello"],
                ])
            #expect(sent.status == 200)
            #expect(sent["ok"] == true)
            let run = try await c.post(
                "/api/threads/\(receiver)/run", ["seconds": 5, "returnAfterSourceHandled": true])
            #expect(run["exitReason"] == "handledSource")
            let after = try await c.get("/api/threads/\(receiver)/sources/\(s)")
            #expect(after["received"] == 1)
            #expect(after["recentMessages"].items.first?["data"] == "hello")
            #expect(after["recentMessages"].items.first?["msgid"] == 7)
        }
    }

    @Test("runNested runs the loop recursively and reports its own exit")
    func nestedRun() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.createThread()
            let nested = try await c.post(
                "/api/threads/\(t)/perform",
                ["selector": "runNested", "args": ["seconds": 0.05], "waitUntilDone": true, "timeout": 10])
            #expect(nested.status == 200)
            #expect(nested["result", "exitReason"] == "timedOut")
            #expect(nested["result", "depth"] == 1)
            let thread = try await c.get("/api/threads/\(t)")
            #expect((thread["exits", "timedOut"].number ?? 0) >= 1)
        }
    }
}
