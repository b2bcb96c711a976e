import Foundation
import RunLoopCore
import RunLoopServer
import Testing
import RunLoopTestSupport

/// The explainer over HTTP against the real binary: every exit cause code with
/// its details (the answer of a manual run, `lastExit`, `run-exit` events, the
/// log at shutdown), and every kind of `wokeBy` in `GET /turns` with the
/// callouts of its turn. Nothing sleeps: runs are long and ended by what the
/// test does, or waited on with deadlines (the loop asleep, a turn recorded).
@Suite("E2E explain: exit causes and turns")
struct E2EExplainCauseTests {
    // MARK: - Exit causes

    @Test("source_handled: a signalled custom source, with returnAfterSourceHandled")
    func sourceHandled() async throws {
        try await ServerProcess.withManualThread { c, t in
            let source = try await c.post("/api/threads/\(t)/sources", ["kind": "custom"])
            let s = try #require(source["id"].string)
            let signal = try await c.post("/api/threads/\(t)/sources/\(s)/signal", ["wakeup": true])
            #expect(signal.status == 200)
            let run = try await c.run(t, ["seconds": 20, "returnAfterSourceHandled": true])
            #expect(run["exitReason"] == "handledSource")
            #expect(run["cause", "code"] == "source_handled")
            #expect(run["cause", "source"] == .string(s))
            #expect(run["cause", "kind"] == "source")
            #expect(run["cause", "perform"] == .null)
            #expect(run["cause", "message"].string?.contains(s) == true)
            let thread = try await c.get("/api/threads/\(t)")
            #expect(thread["lastExit", "cause"] == run["cause"])
        }
    }

    @Test("source_handled: a perform ran through its mode's custom source")
    func sourceHandledByPerform() async throws {
        try await ServerProcess.withManualThread { c, t in
            let queued = try await c.post("/api/threads/\(t)/perform", ["selector": "count", "args": ["name": "hits"]])
            #expect(queued.status == 202)
            let p = try #require(queued["performId"].string)
            let run = try await c.run(t, ["seconds": 20, "returnAfterSourceHandled": true])
            #expect(run["exitReason"] == "handledSource")
            #expect(run["cause", "code"] == "source_handled")
            #expect(run["cause", "perform"] == .string(p))
            #expect(run["cause", "source"] == .string("perform:\(p)"))
            #expect(run["cause", "kind"] == "perform")
            #expect(try await c.get("/api/threads/\(t)/log")["counters", "hits"] == 1)
        }
    }

    @Test("deadline: timers fired meanwhile, and timers never count as handled sources")
    func deadlineWithTimerFires() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.manualThread()
            let timer = try await c.post("/api/threads/\(t)/timers", ["interval": 0.05])
            let tm = try #require(timer["id"].string)
            let events = try EventStreamClient<Value>(port: server.port, path: "/api/events?thread=\(t)")
            defer { events.disconnect() }
            #expect(events.next(timeout: 10) { $0.name == "hello" } != nil)
            let run = try await c.run(t, ["seconds": 1, "returnAfterSourceHandled": true])
            #expect(run["exitReason"] == "timedOut")
            #expect(run["cause", "code"] == "deadline")
            #expect(run["cause", "seconds"] == 1)
            let fires = try #require(run["cause", "timerFires"].number)
            #expect(fires >= 1)
            let message = run["cause", "message"].string ?? ""
            #expect(message.contains("1 s"), "\(message)")
            #expect(message.contains("timers never count as handled sources"), "\(message)")
            // The timer's own count covers at least the fires the cause counted.
            let counted = try await c.get("/api/threads/\(t)/timers/\(tm)")["fires"].number ?? 0
            #expect(counted >= fires)
            // The same exit, cause included, as a run-exit event.
            let exit = events.next(timeout: 10) { $0.name == "run-exit" }
            #expect(exit?.data["thread"] == .string(t))
            #expect(exit?.data["cause"] == run["cause"])
        }
    }

    @Test("stop_request: who stopped the run, with the caller's X-Request-Id")
    func stopRequest() async throws {
        try await ServerProcess.withManualThread { c, t in
            async let run = c.run(t, ["seconds": 120])
            try await c.waitUntilWaiting(t, timeout: 60)
            let stop = try await c.send("POST", "/api/threads/\(t)/stop", headers: [("X-Request-Id", "explain-stop-1")])
            #expect(stop.status == 200)
            #expect(stop.header("X-Request-Id") == "explain-stop-1")
            #expect(stop["exitReason"] == "stopped")
            #expect(stop["cause", "code"] == "stop_request")
            #expect(stop["cause", "by"] == .string("POST /api/threads/\(t)/stop"))
            #expect(stop["cause", "requestId"] == "explain-stop-1")
            #expect(stop["cause", "message"].string?.contains("POST /api/threads/\(t)/stop") == true)
            let ran = try await run
            #expect(ran["cause"] == stop["cause"])
            #expect(try await c.get("/api/threads/\(t)")["lastExit", "cause"] == stop["cause"])
        }
    }

    @Test("stop_selector: a perform of stop ends the run from inside the loop")
    func stopSelector() async throws {
        try await ServerProcess.withManualThread { c, t in
            let queued = try await c.post("/api/threads/\(t)/perform", ["selector": "stop"])
            #expect(queued.status == 202)
            let p = try #require(queued["performId"].string)
            let run = try await c.run(t, ["seconds": 30])
            #expect(run["exitReason"] == "stopped")
            #expect(run["cause", "code"] == "stop_selector")
            #expect(run["cause", "perform"] == .string(p))
            #expect(run["cause", "by", "kind"] == "perform")
            #expect(run["cause", "by", "id"] == .string(p))
            #expect(run["cause", "message"].string?.contains(p) == true)
        }
    }

    @Test("stop_selector: a timer's stop action names the timer, with no perform detail")
    func stopSelectorByTimer() async throws {
        try await ServerProcess.withManualThread { c, t in
            let timer = try await c.post(
                "/api/threads/\(t)/timers", ["interval": 0.05, "action": ["selector": "stop"]])
            let tm = try #require(timer["id"].string)
            let run = try await c.run(t, ["seconds": 30])
            #expect(run["exitReason"] == "stopped")
            #expect(run["cause", "code"] == "stop_selector")
            #expect(run["cause", "by", "kind"] == "timer")
            #expect(run["cause", "by", "id"] == .string(tm))
            #expect(run["cause", "perform"] == .null)
            #expect(run["cause", "message"].string?.contains("timer \(tm)") == true)
        }
    }

    @Test("stop_selector: an idle task's stop names the task")
    func stopSelectorByTask() async throws {
        try await ServerProcess.withManualThread { c, t in
            let task = try await c.post("/api/threads/\(t)/tasks", ["id": "halt", "selector": "stop"])
            #expect(task.status == 201)
            let run = try await c.run(t, ["seconds": 30])
            #expect(run["exitReason"] == "stopped")
            #expect(run["cause", "code"] == "stop_selector")
            #expect(run["cause", "by", "kind"] == "task")
            #expect(run["cause", "by", "id"] == "halt")
            #expect(run["cause", "perform"] == .null)
        }
    }

    @Test("stop_selector in a nested run ends that run only; its run-exit event has depth 1")
    func stopSelectorNested() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.manualThread()
            let events = try EventStreamClient<Value>(port: server.port, path: "/api/events?thread=\(t)")
            defer { events.disconnect() }
            #expect(events.next(timeout: 10) { $0.name == "hello" } != nil)
            let outer = try await c.post(
                "/api/threads/\(t)/perform", ["selector": "runNested", "args": ["seconds": 30]])
            let p1 = try #require(outer["performId"].string)
            async let run = c.run(t, ["seconds": 120, "returnAfterSourceHandled": true])
            // The nested run is asleep: two runs under way, the inner one waiting.
            _ = try await c.poll("/api/threads/\(t)", timeout: 60) { $0["state"] == "waiting" && $0["depth"] == 2 }
            let inner = try await c.post("/api/threads/\(t)/perform", ["selector": "stop"])
            let p2 = try #require(inner["performId"].string)
            let ran = try await run
            #expect(ran["depth"] == 0)
            #expect(ran["exitReason"] == "handledSource")
            #expect(ran["cause", "code"] == "source_handled")
            #expect(ran["cause", "perform"] == .string(p1))
            let nested = events.next(timeout: 10) { $0.name == "run-exit" && $0.data["depth"] == 1 }
            #expect(nested?.data["exitReason"] == "stopped")
            #expect(nested?.data["cause", "code"] == "stop_selector")
            #expect(nested?.data["cause", "perform"] == .string(p2))
        }
    }

    @Test("thread_ending: DELETE of a thread inside a run; the final snapshot's last exit")
    func threadEnding() async throws {
        try await ServerProcess.withManualThread { c, t in
            async let run = c.run(t, ["seconds": 120])
            try await c.waitUntilWaiting(t, timeout: 60)
            let ended = try await c.delete("/api/threads/\(t)")
            #expect(ended.status == 200)
            #expect(ended["state"] == "exited")
            #expect(ended["lastExit", "exitReason"] == "stopped")
            #expect(ended["lastExit", "cause", "code"] == "thread_ending")
            #expect(ended["lastExit", "cause", "message"].string?.isEmpty == false)
            let ran = try await run
            #expect(ran.status == 200)
            #expect(ran["cause", "code"] == "thread_ending")
        }
    }

    @Test("service_stopping: SIGTERM stops every run; the log names each thread's final exit and its cause")
    func serviceStopping() async throws {
        let server = try await ServerProcess.started(["--log-format", "json"])
        defer { server.stop() }
        let c = server.client
        let t = try await c.createThread(["run": ["style": "loop", "seconds": 60]])
        try await c.waitUntilWaiting(t, timeout: 60)
        server.send(signal: SIGTERM)
        // Only that it ends cleanly, not how fast: under ThreadSanitizer, beside dozens of
        // servers, the exit status once came more than 20 s after "runloopd stopped".
        #expect(await server.exited(timeout: ServerProcess.startTimeout) == 0, "\(server.log)")
        // The exit status may arrive before the last of stderr does.
        #expect(await server.logged(timeout: 10) { $0.contains("runloopd stopped") }, "\(server.log)")
        let lines = server.log.split(separator: "\n").compactMap { try? JSON.parse(Array($0.utf8)) }
        let ended = lines.first { $0["msg"] == "thread ended" && $0["thread"] == .string(t) }
        let finalExit = try #require(ended?["finalExit"].string, "\(server.log)")
        #expect(finalExit.hasPrefix("stopped in default"), "\(finalExit)")
        #expect(finalExit.contains("(service_stopping)"), "\(finalExit)")
    }

    @Test("mode_missing: a run in a mode nothing was ever added to")
    func modeMissing() async throws {
        try await ServerProcess.withManualThread { c, t in
            let run = try await c.run(t, ["seconds": 20, "mode": "nowhere"])
            #expect(run["exitReason"] == "finished")
            #expect(run["mode"] == "nowhere")
            #expect(run["cause", "code"] == "mode_missing")
            #expect(run["cause", "mode"] == "nowhere")
            #expect(run["cause", "message"].string?.contains("nowhere") == true)
        }
    }

    @Test("mode_missing for default: a keepAlive none thread whose default mode never held anything")
    func defaultModeNeverFilled() async throws {
        // CF's default mode always exists, but it was never filled: by the
        // engine's rule (never filled → missing, filled then emptied → empty)
        // this is mode_missing, not mode_empty.
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.manualThread(keepAlive: "none")
            let run = try await c.run(t, ["seconds": 20])
            #expect(run["exitReason"] == "finished")
            #expect(run["cause", "code"] == "mode_missing")
            #expect(run["cause", "mode"] == "default")
        }
    }

    @Test("mode_empty at entry: the mode was filled, then emptied before the run")
    func modeEmptyAtEntry() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.manualThread(keepAlive: "none")
            let timer = try await c.post("/api/threads/\(t)/timers", ["interval": 60])
            let tm = try #require(timer["id"].string)
            #expect(try await c.delete("/api/threads/\(t)/timers/\(tm)").status == 200)
            let run = try await c.run(t, ["seconds": 20])
            #expect(run["exitReason"] == "finished")
            #expect(run["cause", "code"] == "mode_empty")
            #expect(run["cause", "mode"] == "default")
            #expect(run["cause", "atEntry"] == true)
            #expect(run["cause", "emptiedBy"] == .null)
        }
    }

    @Test("mode_empty emptied by a one-shot timer that fired during the run; the next run is empty at entry")
    func modeEmptiedByTimer() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.manualThread(keepAlive: "none")
            let timer = try await c.post("/api/threads/\(t)/timers", ["interval": 0.05, "repeats": false])
            #expect(timer.status == 201)
            let tm = try #require(timer["id"].string)
            let run = try await c.run(t, ["seconds": 20])
            #expect(run["exitReason"] == "finished")
            #expect(run["cause", "code"] == "mode_empty")
            #expect(run["cause", "mode"] == "default")
            #expect(run["cause", "atEntry"] == false)
            #expect(run["cause", "emptiedBy", "kind"] == "timer")
            #expect(run["cause", "emptiedBy", "id"] == .string(tm))
            #expect(run["cause", "emptiedBy", "how"].string?.contains("fired once") == true)
            #expect(try await c.get("/api/threads/\(t)/timers/\(tm)")["fires"] == 1)
            let again = try await c.run(t, ["seconds": 20])
            #expect(again["cause", "code"] == "mode_empty")
            #expect(again["cause", "atEntry"] == true)
        }
    }

    @Test("mode_empty emptied by a perform: it ran and its mode's perform source left the mode")
    func modeEmptiedByPerform() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.manualThread(keepAlive: "none")
            let queued = try await c.post("/api/threads/\(t)/perform", ["selector": "count", "args": ["name": "n"]])
            let p = try #require(queued["performId"].string)
            let run = try await c.run(t, ["seconds": 20])
            #expect(run["exitReason"] == "finished")
            #expect(run["cause", "code"] == "mode_empty")
            #expect(run["cause", "atEntry"] == false)
            #expect(run["cause", "emptiedBy", "kind"] == "perform")
            #expect(run["cause", "emptiedBy", "id"] == .string(p))
            #expect(run["cause", "emptiedBy", "how"].string?.contains("ran") == true)
        }
    }

    @Test("a delayed perform fires from a timer: never a handled source, counted in timerFires; it empties the mode")
    func delayedPerform() async throws {
        try await ServerProcess.withManualThread { c, t in
            _ = try await c.post(
                "/api/threads/\(t)/perform", ["selector": "count", "args": ["name": "n"], "afterDelay": 0.05])
            let run = try await c.run(t, ["seconds": 1, "returnAfterSourceHandled": true])
            #expect(run["exitReason"] == "timedOut")
            #expect(run["cause", "code"] == "deadline")
            #expect(run["cause", "timerFires"] == 1)
            #expect(try await c.get("/api/threads/\(t)/log")["counters", "n"] == 1)

            let empty = try await c.manualThread(keepAlive: "none")
            let queued = try await c.post(
                "/api/threads/\(empty)/perform", ["selector": "count", "args": ["name": "n"], "afterDelay": 0.05])
            let p = try #require(queued["performId"].string)
            let finished = try await c.run(empty, ["seconds": 20])
            #expect(finished["exitReason"] == "finished")
            #expect(finished["cause", "code"] == "mode_empty")
            #expect(finished["cause", "emptiedBy", "kind"] == "perform")
            #expect(finished["cause", "emptiedBy", "id"] == .string(p))
            #expect(finished["cause", "emptiedBy", "how"].string?.contains("delay") == true)
        }
    }

    @Test("mode_empty emptied by a source invalidated during the run (seen at the next wake-up)")
    func modeEmptiedBySource() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.manualThread(keepAlive: "none")
            let source = try await c.post("/api/threads/\(t)/sources", ["kind": "custom"])
            let s = try #require(source["id"].string)
            async let run = c.run(t, ["seconds": 120])
            try await c.waitUntilWaiting(t, timeout: 60)
            #expect(try await c.delete("/api/threads/\(t)/sources/\(s)").status == 200)
            // CF sees the empty mode only at the end of a pass: wake it.
            #expect(try await c.post("/api/threads/\(t)/wakeup").status == 200)
            let ran = try await run
            #expect(ran["exitReason"] == "finished")
            #expect(ran["cause", "code"] == "mode_empty")
            #expect(ran["cause", "atEntry"] == false)
            #expect(ran["cause", "emptiedBy", "kind"] == "source")
            #expect(ran["cause", "emptiedBy", "id"] == .string(s))
            #expect(ran["cause", "emptiedBy", "how"] == "was invalidated")
        }
    }
}
