import Foundation
import RunLoopCore
import RunLoopServer
import Testing
import RunLoopTestSupport

/// Every error status of docs/api.md and openapi.json, with its JSON body, against the real binary.
@Suite("E2E errors")
struct E2EErrorTests {
    /// `{"error": {"code", "message", "field"}}` with the expected code and field.
    private func expectError(
        _ response: TestHTTPResponse, _ status: Int, _ code: String, field: Value = .null,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(response.status == status, "\(response)", sourceLocation: sourceLocation)
        #expect(response.header("Content-Type") == "application/json", sourceLocation: sourceLocation)
        #expect(response["error", "code"] == .string(code), "\(response)", sourceLocation: sourceLocation)
        #expect(response["error", "message"].string?.isEmpty == false, sourceLocation: sourceLocation)
        #expect(response["error", "field"] == field, "\(response)", sourceLocation: sourceLocation)
    }

    @Test("400: a bad value names its field, unknown fields and bad JSON are rejected")
    func badRequests() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            expectError(
                try await c.post("/api/threads", ["keepAlive": "sometimes"]), 400, "bad_value", field: "keepAlive")
            expectError(
                try await c.post("/api/threads", ["run": ["style": "manual", "seconds": -1]]), 400, "bad_value",
                field: "run.seconds")
            expectError(try await c.post("/api/threads", ["nmae": "typo"]), 400, "unknown_field", field: "nmae")
            expectError(
                try await c.post("/api/threads", ["run": ["stlye": "loop"]]), 400, "unknown_field", field: "run.stlye")
            expectError(
                try await c.send(
                    "POST", "/api/threads", body: Array("{\"name\": ".utf8), contentType: "application/json"),
                400, "bad_json")
            expectError(
                try await c.send("POST", "/api/threads", body: Array("[1]".utf8), contentType: "application/json"), 400,
                "bad_value")
            let t = try await c.manualThread()
            // Found by schemathesis: a body of only whitespace is not JSON (an empty body is `{}`).
            expectError(
                try await c.send("POST", "/api/threads/\(t)/stop", body: [0x0D], contentType: "application/json"), 400,
                "bad_json")
            expectError(try await c.post("/api/threads/\(t)/run", [:]), 400, "bad_value", field: "seconds")
            expectError(
                try await c.post("/api/threads/\(t)/run", ["seconds": 1e300]), 400, "bad_value", field: "seconds")
            expectError(
                try await c.post("/api/threads/\(t)/run", ["seconds": 1, "mode": "common"]), 400, "bad_value",
                field: "mode")
            expectError(
                try await c.post("/api/threads/\(t)/timers", ["interval": 0]), 400, "bad_value", field: "interval")
            expectError(
                try await c.post("/api/threads/\(t)/timers", ["interval": 1e-12]), 400, "bad_value", field: "interval")
            expectError(
                try await c.post("/api/threads/\(t)/perform", ["selector": "nope"]), 400, "unknown_selector",
                field: "selector")
            expectError(
                try await c.post("/api/threads/\(t)/perform", ["selector": "sleep", "args": ["ms": "long"]]), 400,
                "bad_value", field: "args.ms")
            expectError(
                try await c.post("/api/threads/\(t)/observers", ["activities": ["lunch"]]), 400, "bad_value",
                field: "activities")
            expectError(try await c.get("/api/threads/\(t)/activity?since=-1"), 400, "bad_value", field: "since")
            expectError(try await c.delete("/api/threads/\(t)/perform"), 400, "bad_value", field: "selector")
            expectError(try await c.post("/api/threads/\(t)/stop", ["now": true]), 400, "unknown_field", field: "now")
            // The server is still healthy after all of that.
            #expect(try await c.get("/healthz").status == 200)
        }
    }

    @Test("404: unknown ids and unknown endpoints")
    func notFound() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let missing = try await c.get("/api/threads/t999")
            expectError(missing, 404, "not_found")
            #expect(missing["error", "message"] == "no thread t999")
            let t = try await c.createThread()
            expectError(try await c.get("/api/threads/\(t)/timers/tm999"), 404, "not_found")
            expectError(try await c.delete("/api/threads/\(t)/sources/s999"), 404, "not_found")
            expectError(try await c.delete("/api/threads/\(t)/tasks/nobody"), 404, "not_found")
            expectError(try await c.post("/api/threads/t999/run", ["seconds": 1]), 404, "not_found")
            expectError(try await c.get("/api/nothing/here"), 404, "not_found")
        }
    }

    @Test("405: a wrong method gets Allow")
    func methodNotAllowed() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let put = try await c.send("PUT", "/api/threads", body: Array("{}".utf8), contentType: "application/json")
            expectError(put, 405, "method_not_allowed")
            #expect(put.header("Allow") == "GET, HEAD, POST")
            let t = try await c.createThread()
            let get = try await c.get("/api/threads/\(t)/stop")
            expectError(get, 405, "method_not_allowed")
            #expect(get.header("Allow") == "POST")
            let health = try await c.send("POST", "/healthz")
            #expect(health.status == 405)
            #expect(health.header("Allow") == "GET, HEAD")
        }
    }

    @Test("409: not_running, already_running, not_manual, source kinds")
    func conflicts() async throws {
        try await ServerProcess.withManualThread { c, t in
            expectError(try await c.post("/api/threads/\(t)/stop"), 409, "not_running")
            async let run = c.post("/api/threads/\(t)/run", ["seconds": 20])
            try await c.waitUntilWaiting(t)
            expectError(try await c.post("/api/threads/\(t)/run", ["seconds": 1]), 409, "already_running")
            #expect(try await c.post("/api/threads/\(t)/stop")["exitReason"] == "stopped")
            #expect(try await run["exitReason"] == "stopped")
            let loop = try await c.createThread()
            expectError(try await c.post("/api/threads/\(loop)/run", ["seconds": 1]), 409, "not_manual")
            let port = try await c.post("/api/threads/\(loop)/sources", ["kind": "port"])
            let s = try #require(port["id"].string)
            expectError(
                try await c.post("/api/threads/\(loop)/sources/\(s)/signal"), 409, "wrong_kind", field: "sourceId")
            let ended = try await c.delete("/api/threads/\(loop)")
            #expect(ended.status == 200)
            #expect(ended["state"] == "exited")
            let late = try await c.post("/api/threads/\(loop)/timers", ["interval": 1])
            #expect(late.status == 409)
            #expect(["thread_exited", "thread_ended"].contains(late["error", "code"]), "\(late)")
        }
    }

    @Test("413, 415, 429 (+Retry-After), and 202 for a wait that passes")
    func limits() async throws {
        try await ServerProcess.with(["--max-threads", "2", "--max-body", "1024"]) { server in
            let c = server.client
            let big = Value.object(["name": .string(String(repeating: "x", count: 4096))])
            expectError(
                try await c.send("POST", "/api/threads", body: JSON.serialize(big), contentType: "application/json"),
                413,
                "payload_too_large")
            expectError(
                try await c.send("POST", "/api/threads", body: Array("{}".utf8), contentType: "text/plain"), 415,
                "unsupported_media_type")
            let first = try await c.manualThread()
            _ = try await c.createThread()
            let third = try await c.post("/api/threads", [:])
            expectError(third, 429, "too_many_threads")
            #expect(third.header("Retry-After") == "1")
            let timeout = try await c.post(
                "/api/threads/\(first)/perform", ["selector": "echo", "waitUntilDone": true, "timeout": 0.1])
            // The perform was accepted and stays queued: 202, never a 5xx.
            #expect(timeout.status == 202)
            #expect(timeout["state"] == "pending")
            // Ending a thread frees its place.
            #expect(try await c.delete("/api/threads/\(first)").status == 200)
            #expect(try await c.post("/api/threads", [:]).status == 201)
        }
    }
}
