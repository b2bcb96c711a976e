import Foundation
import RunLoopCore
import RunLoopServer
import Testing
import RunLoopTestSupport

/// What woke each turn (`wokeBy` in `GET /turns`) and the callouts filed in it.
extension E2EExplainCauseTests {
    @Test("wokeBy none and timeout: a run's first turn, and the turn its deadline ends")
    func wokeByNoneAndTimeout() async throws {
        try await ServerProcess.withManualThread { c, t in
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
        try await ServerProcess.withManualThread { c, t in
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
        try await ServerProcess.withManualThread { c, t in
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
        try await ServerProcess.withManualThread { c, t in
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
        try await ServerProcess.withManualThread { c, t in
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
        try await ServerProcess.withManualThread { c, t in
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
        try await ServerProcess.withManualThread { c, t in
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
        try await ServerProcess.withManualThread { c, t in
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
        try await ServerProcess.withManualThread { c, t in
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
