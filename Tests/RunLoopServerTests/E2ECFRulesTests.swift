import Foundation
import RunLoopCore
import RunLoopServer
import Testing
import RunLoopTestSupport

/// CF's own rules where runloopd used to be kinder, and the explainer's
/// answers about them, over HTTP against the real binary: mode-name hints,
/// removals that do not wake, the owner of another thread's source, turns
/// filtered and counted, a cause that lists the whole pass, and
/// `mode_never_runs` only for work that waits. Nothing sleeps: every wait is
/// a condition with a deadline.
@Suite("E2E CF rules: hints, removals, turns, causes")
struct E2ECFRulesTests {
    static let fast = ["--lost-wakeup-after", "0.2", "--mode-never-runs-after", "0.3"]

    @Test("a mode named like CF's or Cocoa's: a hint in the cause and a mode_misnamed warning")
    func modeHints() async throws {
        try await ServerProcess.with(Self.fast) { server in
            let c = server.client
            let t = try await c.manualThread()
            // CF's own name is an alias: the keep-alive port holds default.
            let aliased = try await c.run(t, ["seconds": 0.05, "mode": "kCFRunLoopDefaultMode"])
            #expect(aliased["exitReason"] == "timedOut")
            #expect(aliased["mode"] == "default")
            for name in ["NSDefaultRunloopMode", "kCFRunLoopDefault", "defualt"] {
                let run = try await c.run(t, ["seconds": 0.05, "mode": .string(name)])
                #expect(run["exitReason"] == "finished", "\(name)")
                #expect(run["cause", "code"] == "mode_missing", "\(name)")
                #expect(run["cause", "didYouMean"] == "default", "\(name)")
                #expect(run["cause", "message"].string?.contains("did you mean default?") == true, "\(name)")
                let warning = try await c.warning(t, "mode_misnamed") { $0["subjects"] == [.string(name)] }
                #expect(warning["details", "didYouMean"] == "default")
                #expect(warning["message"].string?.contains("did you mean default") == true)
            }
            // A mode far from any known one gets no hint.
            let custom = try await c.run(t, ["seconds": 0.05, "mode": "tracking"])
            #expect(custom["cause", "code"] == "mode_missing")
            #expect(custom["cause", "didYouMean"] == .null)
            // Close to common: an item added there is hinted too.
            let tm = try await c.post("/api/threads/\(t)/timers", ["interval": 1, "mode": "NSRunLoopCommonMode"])
            #expect(tm.status == 201)
            #expect(tm["modeHint"].string?.contains("did you mean common") == true, "\(tm)")
            let plain = try await c.post("/api/threads/\(t)/timers", ["interval": 1, "mode": "tracking"])
            #expect(plain["modeHint"] == .null)
            let common = try await c.warning(t, "mode_misnamed") { $0["subjects"] == ["NSRunLoopCommonMode"] }
            #expect(common["details", "didYouMean"] == "common")
        }
    }

    @Test("DELETE does not wake the loop: asleep in an empty mode, said by /why and a warning; ?wakeup=true wakes")
    func removalsDoNotWake() async throws {
        try await ServerProcess.with(Self.fast) { server in
            let c = server.client
            // [runLoop run] kept alive by its port: remove the port.
            let t = try await c.createThread(["run": ["style": "run"]])
            try await c.waitUntilWaiting(t)
            let port = try #require(try await c.get("/api/threads/\(t)")["keepAliveSource"].string)
            let removed = try await c.delete("/api/threads/\(t)/sources/\(port)")
            #expect(removed.status == 200)
            #expect(removed["valid"] == false)
            let warning = try await c.warning(t, "empty_mode_asleep") { $0["active"] == true }
            #expect(warning["details", "mode"] == "default")
            let asleep = try await c.get("/api/threads/\(t)")
            #expect(asleep["state"] == "waiting", "the removal did not wake the loop: \(asleep)")
            #expect(asleep["exits", "finished"] == 0)
            let why = try await c.get("/api/threads/\(t)/why")
            let mode = try #require(why["modes"].items.first { $0["mode"] == "default" })
            #expect(mode["verdict"].string?.contains("now empty") == true, "\(why)")
            #expect(try await c.post("/api/threads/\(t)/wakeup").status == 200)
            let ended = try await c.poll("/api/threads/\(t)") { $0["state"] == "exited" }
            #expect(ended["lastExit", "exitReason"] == "finished")
            #expect(ended["lastExit", "cause", "emptiedBy", "id"] == .string(port))
            _ = try await c.warning(t, "empty_mode_asleep") { $0["active"] == false }

            // The same removal asking for the wake-up ends the run at once.
            let u = try await c.createThread(["run": ["style": "run"]])
            try await c.waitUntilWaiting(u)
            let uport = try #require(try await c.get("/api/threads/\(u)")["keepAliveSource"].string)
            #expect(try await c.delete("/api/threads/\(u)/sources/\(uport)?wakeup=maybe").status == 400)
            #expect(try await c.delete("/api/threads/\(u)/sources/\(uport)?wakeup=true").status == 200)
            let woken = try await c.poll("/api/threads/\(u)") { $0["state"] == "exited" }
            #expect(woken["lastExit", "cause", "code"] == "mode_empty")

            // A timer invalidated the same way, under a manual run: asleep until woken.
            let v = try await c.createThread(["keepAlive": "none", "run": ["style": "manual"]])
            let tm = try #require(try await c.post("/api/threads/\(v)/timers", ["interval": 60])["id"].string)
            async let ran = c.run(v, ["seconds": 30])
            try await c.waitUntilWaiting(v)
            #expect(try await c.delete("/api/threads/\(v)/timers/\(tm)").status == 200)
            _ = try await c.warning(v, "empty_mode_asleep") { $0["active"] == true }
            #expect(try await c.get("/api/threads/\(v)")["state"] == "waiting")
            #expect(try await c.post("/api/threads/\(v)/wakeup").status == 200)
            let exit = try await ran
            #expect(exit["exitReason"] == "finished")
            #expect(exit["cause", "emptiedBy", "id"] == .string(tm))
        }
    }

    @Test("another thread's source or timer: 404 naming its owner")
    func ownerOfAnotherThreadsItem() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let t1 = try await c.manualThread()
            let t2 = try await c.manualThread()
            let s = try #require(try await c.post("/api/threads/\(t1)/sources", ["kind": "custom"])["id"].string)
            let tm = try #require(try await c.post("/api/threads/\(t1)/timers", ["interval": 1])["id"].string)
            let signal = try await c.post("/api/threads/\(t2)/sources/\(s)/signal")
            #expect(signal.status == 404)
            #expect(signal["error", "message"].string?.contains("source \(s) belongs to thread \(t1)") == true)
            let timer = try await c.get("/api/threads/\(t2)/timers/\(tm)")
            #expect(timer.status == 404)
            #expect(timer["error", "message"].string?.contains("timer \(tm) belongs to thread \(t1)") == true)
            let unknown = try await c.post("/api/threads/\(t2)/sources/s99999/signal")
            #expect(unknown.status == 404)
            #expect(unknown["error", "message"] == "no source s99999")
            #expect(try await c.post("/api/threads/\(t1)/sources/\(s)/signal").status == 200)
        }
    }

    @Test("turns: a ring sized at creation, filters, the count of dropped turns; a cause that lists the pass")
    func turnsAndPasses() async throws {
        try await ServerProcess.with(Self.fast) { server in
            let c = server.client
            #expect(try await c.post("/api/threads", ["turnRingSize": 0]).status == 400)
            #expect(try await c.post("/api/threads", ["turnRingSize": 10_000_000]).status == 400)
            let t = try await c.createThread(["keepAlive": "port", "run": ["style": "manual"], "turnRingSize": 4])
            let tm = try #require(
                try await c.post("/api/threads/\(t)/timers", ["interval": 0.02])["id"].string)
            let timed = try await c.run(t, ["seconds": 0.3])
            #expect(timed["exitReason"] == "timedOut")
            let run = try #require(timed["run"].number)
            let page = try await c.get("/api/threads/\(t)/turns?limit=100")
            #expect(page["capacity"] == 4)
            #expect(page["turns"].items.count == 4)
            let dropped = try #require(page["dropped"].number)
            let last = try #require(page["last"].number)
            #expect(dropped >= 1)
            #expect(dropped + 4 == last, "every turn is either kept or counted as dropped")
            let byTimer = try await c.get("/api/threads/\(t)/turns?wokeBy=timer")
            #expect(!byTimer["turns"].items.isEmpty)
            #expect(byTimer["turns"].items.allSatisfy { $0["wokeBy", "kind"] == "timer" })
            let byId = try await c.get("/api/threads/\(t)/turns?callout=timer&calloutId=\(tm)&run=\(Int(run))")
            #expect(!byId["turns"].items.isEmpty)
            #expect(byId["turns"].items.allSatisfy { $0["run"].number == run })
            #expect(try await c.get("/api/threads/\(t)/turns?calloutId=nothing")["turns"].items.isEmpty)
            #expect(try await c.get("/api/threads/\(t)/turns?run=999999")["turns"].items.isEmpty)
            let first = try #require(page["turns"].items.first?["startedAt"].string)
            let lastAt = try #require(page["turns"].items.last?["startedAt"].string)
            let window = try await c.get("/api/threads/\(t)/turns?from=\(first)&to=\(lastAt)")
            #expect(window["turns"].items.count == 4)
            let future = try await c.get("/api/threads/\(t)/turns?from=2999-01-01T00:00:00Z")
            #expect(future["turns"].items.isEmpty)
            // A window that ends before it begins is empty, not an error (the fuzzer's seed 408792848).
            let backwards = try await c.get("/api/threads/\(t)/turns?from=\(lastAt)&to=2001-01-01T00:00:00Z")
            #expect(backwards.status == 200 && backwards["turns"].items.isEmpty)
            for bad in ["wokeBy=nobody", "callout=widget", "from=yesterday", "run=0"] {
                #expect(try await c.get("/api/threads/\(t)/turns?\(bad)").status == 400, "\(bad)")
            }
            #expect(try await c.delete("/api/threads/\(t)/timers/\(tm)").status == 200)

            // Three performs queued before a returnAfterSourceHandled run: one pass runs them all.
            var ids: [String] = []
            for n in 1...3 {
                let queued = try await c.post(
                    "/api/threads/\(t)/perform", ["selector": "echo", "args": ["n": .number(Double(n))]])
                ids.append(try #require(queued["performId"].string))
            }
            let pass = try await c.run(t, ["seconds": 5, "returnAfterSourceHandled": true])
            #expect(pass["exitReason"] == "handledSource")
            #expect(pass["cause", "code"] == "source_handled")
            let handled = pass["cause", "handled"].items.compactMap { $0["id"].string }
            #expect(handled == ids, "\(pass)")
            #expect(pass["cause", "perform"] == .string(ids[2]), "the single fields name the last")
            #expect(pass["cause", "message"].string?.contains("handled 3 sources and performs") == true)
        }
    }

    @Test("mode_never_runs only for work that waits: not for an unsignalled source on a manual thread")
    func modeNeverRunsNeedsWork() async throws {
        try await ServerProcess.with(Self.fast) { server in
            let c = server.client
            let t = try await c.manualThread()
            let other: Value = ["kind": "custom", "mode": "other"]
            let idle = try #require(try await c.post("/api/threads/\(t)/sources", other)["id"].string)
            let busy = try #require(try await c.post("/api/threads/\(t)/sources", other)["id"].string)
            #expect(try await c.post("/api/threads/\(t)/sources/\(busy)/signal", ["wakeup": false]).status == 200)
            // The thread runs, in default, past the threshold (an idle manual thread raises nothing).
            #expect(try await c.run(t, ["seconds": 0.8])["exitReason"] == "timedOut")
            // The signalled source's check comes after the idle one's would have.
            let raised = try await c.warning(t, "mode_never_runs") { $0["subjects"] == [.string(busy)] }
            #expect(raised["active"] == true)
            let all = try await c.get("/api/warnings?thread=\(t)&code=mode_never_runs")
            #expect(!all["warnings"].items.contains { $0["subjects"] == [.string(idle)] })
        }
    }
}
