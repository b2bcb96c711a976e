import Foundation
import RunLoopCore
import RunLoopServer
import RunLoopTestSupport
import Testing

/// `POST /api/threads/{id}/perform` with `"via":"block"` (issue 38), over
/// HTTP against the real binary: the route's validation, the pending list,
/// predict and run side by side with a selector perform. Nothing sleeps:
/// every wait is a condition with a deadline.
@Suite("E2E block performs: via block on the real binary")
struct E2EBlockPerformTests {
    @Test("a bad via, or a block with afterDelay: 400 bad_value naming the field")
    func badVia() async throws {
        try await ServerProcess.with([]) { server in
            let c = server.client
            let t = try await c.manualThread()
            let path = "/api/threads/\(t)/perform"
            for bad: Value in ["blocks", "", 1, true, ["block"]] {
                let answer = try await c.post(path, ["selector": "count", "via": bad])
                #expect(answer.status == 400, "\(bad): \(answer)")
                #expect(answer["error", "code"] == "bad_value", "\(bad): \(answer)")
                #expect(answer["error", "field"] == "via" || answer["error", "message"].string?.contains("via") == true)
            }
            let named = try await c.post(path, ["selector": "count", "via": "Block"])
            #expect(named["error", "message"].string?.contains("\"selector\", \"block\"") == true, "\(named)")
            let delayed = try await c.post(path, ["selector": "count", "via": "block", "afterDelay": 0.1])
            #expect(delayed.status == 400, "\(delayed)")
            #expect(delayed["error", "message"].string?.contains("no delay") == true, "\(delayed)")
            // Nothing was queued by the refusals; null is the default.
            #expect(try await c.get(path)["pending"].items.isEmpty)
            let plain = try await c.post(path, ["selector": "count", "via": .null])
            #expect(plain.status == 202)
            #expect(plain["via"] == "selector")
        }
    }

    @Test("a block alone: pending as via block, predicted and run timedOut; a selector: handledSource")
    func blockVersusSelector() async throws {
        try await ServerProcess.with([]) { server in
            let c = server.client
            let t = try await c.manualThread(keepAlive: "none")
            let run: Value = ["mode": "solo", "seconds": 0.3, "returnAfterSourceHandled": true]

            let queued = try await c.post(
                "/api/threads/\(t)/perform", ["selector": "count", "modes": ["solo"], "via": "block"])
            #expect(queued.status == 202, "\(queued)")
            #expect(queued["via"] == "block")
            let pending = try await c.get("/api/threads/\(t)/perform")["pending"].items
            #expect(pending.map { $0["via"] } == ["block"], "\(pending)")
            #expect(pending.first?["state"] == "pending")
            let snapshot = try await c.get("/api/threads/\(t)")
            #expect(snapshot["pendingPerforms"].items.map { $0["via"] } == ["block"], "\(snapshot)")

            let predicted = try await c.post("/api/threads/\(t)/predict", run)
            #expect(predicted["prediction", "exitReason"] == "timedOut", "\(predicted)")
            #expect(predicted["prediction", "certain"] == true)
            let ran = try await c.post("/api/threads/\(t)/run", run, timeout: 30)
            #expect(ran["exitReason"] == "timedOut", "\(ran)")
            #expect(ran["cause", "code"] == "deadline")
            #expect(try await c.get("/api/threads/\(t)/perform")["pending"].items.isEmpty)

            let selector = try await c.post("/api/threads/\(t)/perform", ["selector": "count", "modes": ["solo"]])
            #expect(selector["via"] == "selector")
            let predictedSelector = try await c.post("/api/threads/\(t)/predict", run)
            #expect(predictedSelector["prediction", "exitReason"] == "handledSource", "\(predictedSelector)")
            let ranSelector = try await c.post("/api/threads/\(t)/run", run, timeout: 30)
            #expect(ranSelector["exitReason"] == "handledSource", "\(ranSelector)")
            #expect(ranSelector["cause", "perform"] == selector["performId"], "\(ranSelector)")
        }
    }
}
