import Foundation
@testable import MicroHTTP
import RunLoopCore
import RunLoopTestSupport
import Testing

@testable import RunLoopServer

/// The API frictions a learner met (issue 39): a timer is created with the
/// `modes` it is answered with; a one-shot timer needs only its `delay`; a
/// delayed perform past its fire date says it is overdue and why; a port in
/// use is named in the error, not libmicrohttpd's "port 0".
@Suite("E2E frictions: timers' modes and delay, overdue performs, the port in use")
struct E2EFrictionTests {
    @Test("POST /timers accepts modes as GET answers them; mode and modes together are refused")
    func timerModes() async throws {
        try await ServerProcess.withManualThread { c, t in
            let made = try await c.post(
                "/api/threads/\(t)/timers", ["interval": 1, "modes": ["default", "tracking", "default"]])
            #expect(made.status == 201, "\(made.json)")
            #expect(made["modes"] == ["default", "tracking"])
            let id = try #require(made["id"].string)
            // What GET answers can be sent back as it is.
            let read = try await c.get("/api/threads/\(t)/timers/\(id)")
            let again = try await c.post("/api/threads/\(t)/timers", ["interval": 1, "modes": read["modes"]])
            #expect(again.status == 201)
            #expect(again["modes"] == read["modes"])
            let both = try await c.post(
                "/api/threads/\(t)/timers", ["interval": 1, "mode": "default", "modes": ["tracking"]])
            #expect(both.status == 400)
            #expect(both["error", "field"] == "modes")
            #expect(try await c.post("/api/threads/\(t)/timers", ["interval": 1, "modes": []]).status == 400)
        }
    }

    @Test("a one-shot timer needs only delay: it fires once; repeats without interval is refused")
    func oneShotByDelay() async throws {
        try await ServerProcess.withManualThread { c, t in
            let made = try await c.post("/api/threads/\(t)/timers", ["delay": 0.05])
            #expect(made.status == 201, "\(made.json)")
            #expect(made["repeats"] == false)
            let id = try #require(made["id"].string)
            let run = try await c.post("/api/threads/\(t)/run", ["seconds": 0.3])
            #expect(run["exitReason"] == "timedOut")
            let after = try await c.get("/api/threads/\(t)/timers/\(id)")
            #expect(after["fires"] == 1)
            #expect(after["valid"] == false)
            let repeating = try await c.post("/api/threads/\(t)/timers", ["delay": 0.05, "repeats": true])
            #expect(repeating.status == 400)
            #expect(repeating["error", "message"].string?.contains("needs interval") == true)
            let neither = try await c.post("/api/threads/\(t)/timers", ["repeats": false])
            #expect(neither.status == 400)
            #expect(neither["error", "message"].string?.contains("or delay") == true)
        }
    }

    @Test("a delayed perform past its fire date on a loop that does not run says it is overdue")
    func overduePerform() async throws {
        try await ServerProcess.withManualThread { c, t in
            let sent = try await c.post(
                "/api/threads/\(t)/perform", ["selector": "echo", "afterDelay": 0.05, "timeout": 0])
            let pid = try #require(sent["performId"].string, "\(sent.json)")
            let fresh = try await c.get("/api/threads/\(t)/performs/\(pid)")
            #expect(fresh["state"] == "delayed")
            let late = try await c.poll("/api/threads/\(t)/performs/\(pid)") { ($0["overdueMs"].number ?? 0) > 0 }
            #expect(late["state"] == "delayed")
            #expect(late["note"].string?.hasPrefix("overdue") == true)
            let listed = try await c.get("/api/threads/\(t)/perform")
            #expect((listed["pending"].items.first?["overdueMs"].number ?? 0) > 0)
            // Once the loop runs, the timer fires: done, nothing overdue any more.
            _ = try await c.post("/api/threads/\(t)/run", ["seconds": 0.1])
            let done = try await c.poll("/api/threads/\(t)/performs/\(pid)") { $0["state"] == "done" }
            #expect(done["overdueMs"] == .null)
            #expect(done["note"] == .null)
        }
    }

    @Test("a port in use is named in the error: never libmicrohttpd's port 0")
    func portInUse() async throws {
        try await ServerProcess.with { server in
            let (status, output) = try await ServerProcess.runToExit(["--port", "\(server.port)", "--no-store"])
            #expect(status != 0)
            #expect(output.contains("cannot listen on 127.0.0.1 port \(server.port)"), "\(output)")
            #expect(output.contains("Failed to bind to port \(server.port)"), "\(output)")
            #expect(output.contains("another process listens on port \(server.port)"), "\(output)")
            #expect(!output.contains("port 0"), "\(output)")
        }
        #expect(HTTPServerCore.naming(port: 0, in: "Failed to bind to port 0: x") == "Failed to bind to port 0: x")
    }
}
