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
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.manualThread()
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
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.manualThread()
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
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.manualThread()
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
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.manualThread()
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
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.manualThread()
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
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.manualThread()
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
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.manualThread()
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
        #expect(await server.exited(timeout: 20) == 0, "\(server.log)")
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
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.manualThread()
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
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.manualThread()
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

    // MARK: - What woke each turn

    @Test("wokeBy none and timeout: a run's first turn, and the turn its deadline ends")
    func wokeByNoneAndTimeout() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.manualThread()
            let run = try await c.run(t, ["seconds": 0.5])
            #expect(run["exitReason"] == "timedOut")
            let runNumber = try #require(run["run"].number)
            let turns = try await c.turns(t).filter { $0["run"].number == runNumber }
            #expect(turns.count == 2, "\(turns)")
            let first = try #require(turns.first)
            #expect(first["wokeBy", "kind"] == "none")
            #expect(first["wokeBy", "id"] == .null)
            #expect(first["sleptMs"] == 0)
            #expect(first["end"] == "sleep")
            #expect(first["callouts"].items.isEmpty)
            let last = try #require(turns.last)
            #expect(last["wokeBy", "kind"] == "timeout")
            #expect(last["end"] == "exit")
            #expect(last["callouts"].items.isEmpty)
            #expect((last["sleptMs"].number ?? 0) > 0)
            // No timer ran: the deadline's message says nothing of timers.
            #expect(run["cause", "code"] == "deadline")
            #expect(run["cause", "timerFires"] == 0)
            #expect(run["cause", "message"].string?.contains("timer") == false)
        }
    }

    @Test("wokeBy none: a run that ends in its first turn has one turn, ended by exit")
    func wokeByNoneSingleTurn() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.manualThread()
            let source = try await c.post("/api/threads/\(t)/sources", ["kind": "custom"])
            let s = try #require(source["id"].string)
            _ = try await c.post("/api/threads/\(t)/sources/\(s)/signal", ["wakeup": false])
            let run = try await c.run(t, ["seconds": 20, "returnAfterSourceHandled": true])
            #expect(run["exitReason"] == "handledSource")
            let turns = try await c.turns(t).filter { $0["run"] == run["run"] }
            #expect(turns.count == 1, "\(turns)")
            #expect(turns.first?["wokeBy", "kind"] == "none")
            #expect(turns.first?["end"] == "exit")
            #expect(turns.first?["callouts"].items.map { $0["kind"] } == ["source"])
            #expect(turns.first?["callouts"].items.first?["id"] == .string(s))
        }
    }

    @Test("wokeBy timer: a repeating timer wakes the loop; its fire is the turn's callout")
    func wokeByTimer() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.manualThread()
            let timer = try await c.post("/api/threads/\(t)/timers", ["interval": 0.1])
            let tm = try #require(timer["id"].string)
            let run = try await c.run(t, ["seconds": 1])
            #expect(run["exitReason"] == "timedOut")
            let turns = try await c.turns(t).filter { $0["run"] == run["run"] }
            let woken = turns.filter { $0["wokeBy", "kind"] == "timer" }
            #expect(!woken.isEmpty, "\(turns)")
            for turn in woken {
                #expect(turn["wokeBy", "id"] == .string(tm))
                #expect(turn["callouts"].items.first?["kind"] == "timer")
                #expect(turn["callouts"].items.first?["id"] == .string(tm))
                #expect(turn["end"] == "sleep" || turn["end"] == "exit")
            }
        }
    }

    @Test("wokeBy source: a signal with wake-up into a sleeping loop")
    func wokeBySource() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.manualThread()
            let source = try await c.post("/api/threads/\(t)/sources", ["kind": "custom"])
            let s = try #require(source["id"].string)
            async let run = c.run(t, ["seconds": 120, "returnAfterSourceHandled": true])
            try await c.waitUntilWaiting(t, timeout: 60)
            _ = try await c.post("/api/threads/\(t)/sources/\(s)/signal", ["wakeup": true])
            let ran = try await run
            #expect(ran["exitReason"] == "handledSource")
            #expect(ran["cause", "source"] == .string(s))
            let turns = try await c.turns(t).filter { $0["run"] == ran["run"] }
            let last = try #require(turns.last)
            #expect(turns.count == 2, "\(turns)")
            #expect(last["wokeBy", "kind"] == "source")
            #expect(last["wokeBy", "id"] == .string(s))
            #expect(last["end"] == "exit")
            #expect(last["callouts"].items.map { $0["kind"] } == ["source"])
            #expect(last["callouts"].items.first?["id"] == .string(s))
        }
    }

    @Test("wokeBy port: a message to a port source wakes the loop")
    func wokeByPort() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.manualThread()
            let port = try await c.post("/api/threads/\(t)/sources", ["kind": "port"])
            let s = try #require(port["id"].string)
            async let run = c.run(t, ["seconds": 120, "returnAfterSourceHandled": true])
            try await c.waitUntilWaiting(t, timeout: 60)
            let sent = try await c.post("/api/threads/\(t)/sources/\(s)/messages", ["msgid": 3, "data": "wake"])
            #expect(sent.status == 202)
            let ran = try await run
            #expect(ran["exitReason"] == "handledSource")
            #expect(ran["cause", "code"] == "source_handled")
            #expect(ran["cause", "source"] == .string(s))
            #expect(ran["cause", "kind"] == "port")
            let turns = try await c.turns(t).filter { $0["run"] == ran["run"] }
            let last = try #require(turns.last)
            #expect(turns.count == 2, "\(turns)")
            #expect(last["wokeBy", "kind"] == "port")
            #expect(last["wokeBy", "id"] == .string(s))
            #expect(last["callouts"].items.map { $0["kind"] } == ["port"])
            #expect(last["callouts"].items.first?["id"] == .string(s))
        }
    }

    @Test("wokeBy perform: a perform queued to a sleeping loop")
    func wokeByPerform() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.manualThread()
            async let run = c.run(t, ["seconds": 120, "returnAfterSourceHandled": true])
            try await c.waitUntilWaiting(t, timeout: 60)
            let queued = try await c.post("/api/threads/\(t)/perform", ["selector": "count", "args": ["name": "n"]])
            let p = try #require(queued["performId"].string)
            let ran = try await run
            #expect(ran["exitReason"] == "handledSource")
            #expect(ran["cause", "perform"] == .string(p))
            let turns = try await c.turns(t).filter { $0["run"] == ran["run"] }
            let last = try #require(turns.last)
            #expect(turns.count == 2, "\(turns)")
            #expect(last["wokeBy", "kind"] == "perform")
            #expect(last["wokeBy", "id"] == .string(p))
            #expect(last["callouts"].items.map { $0["kind"] } == ["perform"])
            #expect(last["callouts"].items.first?["id"] == .string(p))
            #expect(last["callouts"].items.first?["selector"] == "count")
        }
    }

    @Test("wokeBy wakeup: POST wakeup with nothing to do; the loop sleeps again")
    func wokeByWakeup() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.manualThread()
            async let run = c.run(t, ["seconds": 120])
            try await c.waitUntilWaiting(t, timeout: 60)
            let woken = try await c.post("/api/threads/\(t)/wakeup")
            #expect(woken.status == 200)
            #expect(woken["woken"] == true)
            let page = try await c.poll("/api/threads/\(t)/turns", timeout: 60) { response in
                response["turns"].items.contains { $0["wokeBy", "kind"] == "wakeup" && $0["end"] == "sleep" }
            }
            let turn = try #require(page["turns"].items.first { $0["wokeBy", "kind"] == "wakeup" })
            #expect(turn["wokeBy", "id"] == .null)
            #expect(turn["callouts"].items.isEmpty)
            #expect((turn["sleptMs"].number ?? 0) > 0)
            // The run goes on: it is still the same one, and a stop ends it.
            try await c.waitUntilWaiting(t, timeout: 60)
            let stop = try await c.post("/api/threads/\(t)/stop")
            #expect(stop["exitReason"] == "stopped")
            #expect(stop["run"] == turn["run"])
            let ran = try await run
            #expect(ran["run"] == turn["run"])
        }
    }

    @Test("an idle task's callout is filed in its turn, also in a mode made common after it first ran")
    func taskCalloutInTurn() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.manualThread()
            _ = try await c.run(t, ["seconds": 0.05, "mode": "mine"])
            _ = try await c.post("/api/threads/\(t)/modes/common", ["mode": "mine"])
            // A port keeps "mine" from being empty.
            _ = try await c.post("/api/threads/\(t)/sources", ["kind": "port", "mode": "mine"])
            for mode in ["default", "mine"] {
                let id = "task-\(mode)"
                _ = try await c.post("/api/threads/\(t)/tasks", ["id": .string(id), "selector": "count"])
                let run = try await c.run(t, ["seconds": 0.3, "mode": .string(mode)])
                #expect(run["exitReason"] == "timedOut")
                let turns = try await c.turns(t).filter { $0["run"] == run["run"] }
                let callouts = turns.flatMap { $0["callouts"].items }
                #expect(
                    callouts.contains { $0["kind"] == "task" && $0["id"] == .string(id) },
                    "\(mode): \(turns)")
            }
        }
    }

    @Test("GET /turns pages with since and limit; last is the newest turn's number")
    func turnsPaging() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.manualThread()
            _ = try await c.run(t, ["seconds": 0.2])
            _ = try await c.run(t, ["seconds": 0.2])
            let all = try await c.get("/api/threads/\(t)/turns")
            #expect(all.status == 200)
            #expect(all["thread"] == .string(t))
            let numbers = all["turns"].items.compactMap { $0["turn"].number }
            #expect(numbers.count >= 4, "\(all)")
            #expect(numbers == numbers.sorted())
            #expect(all["last"].number == numbers.last)
            let one = try await c.get("/api/threads/\(t)/turns?since=\(Int(numbers[0]))&limit=1")
            #expect(one["turns"].items.map { $0["turn"] } == [.number(numbers[1])])
            let none = try await c.get("/api/threads/\(t)/turns?since=\(Int(numbers.last!))")
            #expect(none["turns"].items.isEmpty)
            #expect(try await c.get("/api/threads/\(t)/turns?limit=0").status == 400)
        }
    }
}

extension E2EClient {
    /// `POST /api/threads/{thread}/run`, its answer read for as long as the run
    /// may last plus 30 s (a run the test ends itself never fails on a slow
    /// machine for want of patience).
    func run(_ thread: String, _ body: Value) async throws -> TestHTTPResponse {
        try await post("/api/threads/\(thread)/run", body, timeout: (body["seconds"].number ?? 0) + 30)
    }

    /// Every recorded turn of `thread` (oldest first).
    func turns(_ thread: String) async throws -> [Value] {
        let page = try await get("/api/threads/\(thread)/turns")
        guard page.status == 200 else { throw TestHTTPError("turns of \(thread): \(page)") }
        return page["turns"].items
    }
}
