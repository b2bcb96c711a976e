import Foundation
import RunLoopCore
import RunLoopServer
import Testing
import RunLoopTestSupport

/// Sentences runloopd writes about a loop, asked the way a learner asked
/// them (issue 38), against the real binary: each must be true of the loop
/// as it is now. Nothing sleeps: waits are conditions with deadlines.
@Suite("E2E explain: the texts are true of the loop now")
struct E2EExplainTextsTests {
    @Test("GET /why during a manual run tells the run under way, never 'sleeps until' a signalled source")
    func whyTellsTheRunUnderWay() async throws {
        try await ServerProcess.with(["--lost-wakeup-after", "0.2"]) { server in
            let c = server.client
            let t = try await c.manualThread()
            let s = try #require(try await c.post("/api/threads/\(t)/sources", ["kind": "custom"])["id"].string)
            // Long enough that the signal lands inside it on any machine; the test stops it.
            async let run = c.run(t, ["seconds": 60])
            try await c.waitUntilWaiting(t)
            #expect(try await c.post("/api/threads/\(t)/sources/\(s)/signal", ["wakeup": false]).status == 200)
            _ = try await c.warning(t, "lost_wakeup") { $0["active"] == true }
            let why = try await c.get("/api/threads/\(t)/why")
            #expect(why["state"] == "waiting", "the run is still under way: \(why)")
            let verdict = why["verdict"].string ?? ""
            #expect(verdict.contains("a 60 s run ("), "\(verdict)")
            let mode = try #require(why["modes"].items.first { $0["mode"] == "default" })
            let text = mode["verdict"].string ?? ""
            #expect(!text.contains("sleeps until source"), "\(text)")
            #expect(text.contains("although work is waiting there (source \(s) (signalled))"), "\(text)")
            // The deadline ends the run with the source still signalled (CF
            // checks it after the wake, before any source): never told as
            // the turn that handles it.
            #expect(!text.contains("which comes when its deadline"), "\(text)")
            #expect(
                text.contains("if its deadline passes first (in ")
                    && text.contains("the run returns timedOut with it still waiting"), "\(text)")
            #expect(text.contains("which comes when something wakes it: a message to "), "\(text)")
            #expect(mode["prediction", "exitReason"] == "timedOut", "\(mode["prediction"])")
            #expect((mode["prediction", "atMs"].number ?? .infinity) < 60000, "\(mode["prediction"])")
            let reasons = mode["prediction", "reasons"].items.compactMap(\.string).joined(separator: " | ")
            #expect(!reasons.contains("has no timeout"), "\(reasons)")
            #expect(try await c.post("/api/threads/\(t)/stop").status == 200)
            #expect(try await run["cause", "code"] == "stop_request")
        }
    }

    @Test("'nothing can wake' is never said of a mode whose keep-alive port takes messages: a message wakes it")
    func keepAlivePortCanWake() async throws {
        try await ServerProcess.with(["--max-wait", "4000"]) { server in
            let c = server.client
            let t = try await c.manualThread()
            let port = try #require(try await c.get("/api/threads/\(t)")["keepAliveSource"].string)
            let why = try await c.get("/api/threads/\(t)/why")
            let mode = try #require(why["modes"].items.first { $0["mode"] == "default" })
            let reasons = mode["prediction", "reasons"].items.compactMap(\.string).joined(separator: " | ")
            #expect(!reasons.contains("can wake the loop"), "\(reasons)")
            #expect(reasons.contains("a message to port \(port) (its keep-alive port)"), "\(reasons)")
            #expect(reasons.hasSuffix("a stop, a wake-up, a perform queued or a timer added"), "\(reasons)")
            #expect(mode["verdict"].string?.contains("message to its keep-alive port \(port)") == true, "\(mode)")

            async let run = c.run(t, ["seconds": 3600, "returnAfterSourceHandled": true])
            let raised = try await c.warning(t, "loop_cannot_wake") { $0["active"] == true }
            let message = raised["message"].string ?? ""
            #expect(!message.contains("nothing in the mode that can wake it"), "\(message)")
            #expect(message.contains("a message to its keep-alive port \(port)"), "\(message)")
            // Adding a source never wakes a loop (claim 88): it must be signalled with a wake-up.
            #expect(message.contains("a source added later wakes it only once signalled with a wake-up"), "\(message)")
            try await c.waitUntilWaiting(t)
            let sent = try await c.post("/api/threads/\(t)/sources/\(port)/messages", ["msgid": 1, "data": "hi"])
            #expect(sent.status == 202)
            // The message woke it: the run returns, the keep-alive port the source handled.
            #expect(try await run["exitReason"] == "handledSource")
            #expect(try await run["cause", "source"] == .string(port))
        }
    }
}
