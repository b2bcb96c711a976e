import Foundation
import RunLoopCore
import RunLoopServer
import RunLoopTestSupport
import Testing

/// `POST /predict` on a manual thread during its run (issue 38): the real
/// binary answers for the run under way, from now (its own mode, the time
/// left of its deadline, its flag, `about` naming it), and that run then
/// returns what was said. Its name holds `E2EPredictTests`, so `make test`
/// runs it with the other timing tests, apart.
@Suite("E2E predict: the run under way, from now")
struct UnderWayE2EPredictTests {
    @Test("predict during a run answers for that run, from now")
    func predictDuringARun() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let thread = try await c.manualThread()
            // The run lasts 8 s, ended by the stop below long before: under
            // load the requests between its start and that stop once took
            // more than 1.5 s, and the stop found the run already over.
            // A custom source signalled later, with a wake-up: with
            // returnAfterSourceHandled the run returns handledSource then.
            let source = try #require(
                try await c.post("/api/threads/\(thread)/sources", ["kind": "custom"])["id"].string)
            async let run = c.post(
                "/api/threads/\(thread)/run", ["seconds": 8, "returnAfterSourceHandled": true], timeout: 30)
            try await c.waitUntilWaiting(thread)
            // No body needed: the run under way has its own parameters.
            let during = try await c.post("/api/threads/\(thread)/predict", [:])
            #expect(during.status == 200, "\(during)")
            #expect(during["about", "mode"] == "default", "\(during)")
            #expect(during["about", "seconds"] == 8, "\(during)")
            #expect(during["about", "returnAfterSourceHandled"] == true, "\(during)")
            #expect(during["about", "depth"] == 1, "\(during)")
            #expect(during["about", "asleep"] == true, "\(during)")
            #expect(during["about", "signalled"] == [], "\(during)")
            let left = try #require(during["about", "leftSeconds"].number)
            #expect(left > 0 && left < 8, "\(during)")
            #expect(during["seconds"].number == left, "the prediction's seconds are the time left: \(during)")
            #expect(during["about", "run"].number != nil && during["about", "from"].string != nil, "\(during)")
            // Nothing comes: it times out at its deadline, from now.
            #expect(during["prediction", "exitReason"] == "timedOut", "\(during)")
            #expect(during["prediction", "cause", "code"] == "deadline", "\(during)")
            #expect(during["prediction", "certain"] == true, "\(during)")
            let atMs = try #require(during["prediction", "atMs"].number)
            #expect(abs(atMs - left * 1000) < 1, "\(during)")
            #expect(
                during["prediction", "reasons"].items.first?.string?.contains("under way") == true, "\(during)")
            // Signalled without a wake-up: still asleep, the source waits; the
            // prediction from now says the deadline's pass handles it.
            _ = try await c.post("/api/threads/\(thread)/sources/\(source)/signal", ["wakeup": false])
            let signalled = try await c.post("/api/threads/\(thread)/predict", [:])
            #expect(signalled["about", "signalled"] == [.string(source)], "\(signalled)")
            #expect(signalled["about", "run"] == during["about", "run"], "\(signalled)")
            #expect(signalled["prediction", "exitReason"] == "timedOut", "\(signalled)")
            // A stop asked for: the prediction says stopped by that request.
            let ended = try await c.post("/api/threads/\(thread)/stop")
            #expect(ended.status == 200 || ended.status == 202, "\(ended)")
            let result = try await run
            #expect(result.status == 200, "\(result)")
            #expect(result["run"] == during["about", "run"], "the run predicted is the run that returned: \(result)")
        }
    }
}
