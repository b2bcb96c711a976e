import Foundation
import RunLoopCore
import RunLoopServer
import Testing

/// Token auth, read-only mode, Prometheus metrics and the healthcheck
/// subcommand, against the real binary.
@Suite("E2E operations")
struct E2EOperationsTests {
    @Test("SIGHUP rereads a rotated --token-file (the old token stops working) and never stops the process")
    func sighupReloadsTheTokenFile() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("token-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        let (old, new) = ("old-secret-0123456789", "new-secret-9876543210")
        try Data("\(old)\n".utf8).write(to: file)
        let server = try await RunLoopd.started(["--token-file", file.path])
        defer { server.stop() }
        let c = server.client
        func status(_ token: String) async throws -> Int {
            try await c.send("GET", "/api/threads", headers: [("Authorization", "Bearer \(token)")]).status
        }
        #expect(try await status(old) == 200)
        // A rotated secret: the file changes, then SIGHUP.
        try Data("\(new)\n".utf8).write(to: file)
        server.send(signal: SIGHUP)
        #expect(await server.logged(timeout: 10) { $0.contains("SIGHUP: token reloaded") }, "\(server.log)")
        #expect(try await status(new) == 200)
        #expect(try await status(old) == 401)
        // A file that now holds a token too short: the current one stays, with a warning.
        try Data("short\n".utf8).write(to: file)
        server.send(signal: SIGHUP)
        #expect(await server.logged(timeout: 10) { $0.contains("SIGHUP: kept the old token") }, "\(server.log)")
        #expect(try await status(new) == 200)
        // Still serving; SIGTERM still stops it cleanly.
        server.send(signal: SIGTERM)
        #expect(await server.exited(timeout: 10) == 0, "\(server.log)")
    }

    @Test("--token: /api needs the bearer token (401 + WWW-Authenticate); probes stay open")
    func tokenAuth() async throws {
        try await RunLoopd.with(["--token", "s3cret-token-0123456789"]) { server in
            let c = server.client
            let anonymous = try await c.get("/api/threads")
            #expect(anonymous.status == 401)
            #expect(anonymous.header("WWW-Authenticate")?.hasPrefix("Bearer") == true)
            #expect(anonymous["error"]["code"] == "unauthorized")
            let wrong = try await c.send("GET", "/api/threads", headers: [("Authorization", "Bearer s3cret-tokem")])
            #expect(wrong.status == 401)
            let short = try await c.send("GET", "/api/threads", headers: [("Authorization", "Bearer s3cret")])
            #expect(short.status == 401)
            let good = try await c.send(
                "GET", "/api/threads", headers: [("Authorization", "Bearer s3cret-token-0123456789")])
            #expect(good.status == 200)
            let created = try await c.send(
                "POST", "/api/threads", body: Array("{}".utf8), contentType: "application/json",
                headers: [("Authorization", "bearer s3cret-token-0123456789")])
            #expect(created.status == 201)
            for probe in ["/healthz", "/readyz", "/metrics"] {
                let open = try await c.get(probe)
                #expect(open.status == 200, "\(probe)")
            }
        }
    }

    @Test("--read-only: every mutating call answers 403, reads answer 200")
    func readOnly() async throws {
        try await RunLoopd.with(["--read-only"]) { server in
            let c = server.client
            let create = try await c.post("/api/threads", [:])
            #expect(create.status == 403)
            #expect(create["error"]["code"] == "read_only")
            let delete = try await c.delete("/api/threads/t1")
            #expect(delete.status == 403)
            let list = try await c.get("/api/threads")
            #expect(list.status == 200)
            let selectors = try await c.get("/api/selectors")
            #expect(selectors.status == 200)
        }
    }

    @Test("X-Request-Id is echoed, or one is made up")
    func requestIds() async throws {
        try await RunLoopd.with { server in
            let c = server.client
            let given = try await c.send("GET", "/api/version", headers: [("X-Request-Id", "abc-123")])
            #expect(given.header("X-Request-Id") == "abc-123")
            let made = try await c.get("/healthz")
            #expect(made.header("X-Request-Id")?.hasPrefix("r") == true)
        }
    }

    @Test("--log-format json: every log line is one JSON object, access lines carry the request id")
    func jsonLogs() async throws {
        try await RunLoopd.with(["--log-format", "json"]) { server in
            let c = server.client
            _ = try await c.send("GET", "/api/version", headers: [("X-Request-Id", "json-log-1")])
            let logged = await server.logged(timeout: 10) { $0.contains("json-log-1") }
            #expect(logged)
            let lines = server.log.split(separator: "\n")
            #expect(lines.count >= 3)
            for line in lines {
                let parsed = (try? JSON.parse(Array(line.utf8))) ?? .null
                #expect(parsed["ts"].string != nil && parsed["level"].string != nil, "not a JSON log line: \(line)")
            }
            let access = lines.compactMap { try? JSON.parse(Array($0.utf8)) }.first {
                $0["requestId"] == "json-log-1"
            }
            #expect(access?["route"] == .string("/api/version"))
            #expect(access?["status"] == .string("200"))
        }
    }

    @Test("/metrics: Prometheus text whose values move after real work")
    func metricsMove() async throws {
        try await RunLoopd.with { server in
            let c = server.client
            func scrape() async throws -> [String: Double] {
                let response = try await c.get("/metrics")
                #expect(response.status == 200)
                #expect(response.header("Content-Type")?.hasPrefix("text/plain") == true)
                var values: [String: Double] = [:]
                for line in String(decoding: response.body, as: UTF8.self).split(separator: "\n")
                where !line.hasPrefix("#") {
                    let parts = line.split(separator: " ")
                    if parts.count == 2, let value = Double(parts[1]) { values[String(parts[0])] = value }
                }
                return values
            }
            let before = try await scrape()
            #expect(before["runloopd_run_exits_total{reason=\"stopped\"}"] == 0)
            let t = try await c.manualThread()
            _ = try await c.post("/api/threads/\(t)/timers", ["interval": 0.01])
            let run = try await c.post("/api/threads/\(t)/run", ["seconds": 0.2])
            #expect(run["exitReason"] == "timedOut")
            let perform = try await c.post(
                "/api/threads/\(t)/perform", ["selector": "echo", "waitUntilDone": true, "timeout": 0.1])
            #expect(perform.status == 202)
            let after = try await scrape()
            #expect((after["runloopd_run_exits_total{reason=\"timedOut\"}"] ?? 0) >= 1)
            #expect((after["runloopd_timer_fires_total"] ?? 0) >= 5)
            #expect((after["runloopd_timer_lateness_seconds_count"] ?? 0) >= 5)
            #expect((after["runloopd_performs_total{outcome=\"deadline\"}"] ?? 0) == 1)
            #expect((after["runloopd_wakeup_latency_seconds_count"] ?? 0) >= 4)
            #expect((after["runloopd_commands_queued"] ?? -1) == 1)
            #expect(after["runloopd_threads{state=\"idle\"}"] == 1)
            #expect((after["runloopd_http_requests_total{route=\"/api/threads/{id}/run\",status=\"200\"}"] ?? 0) == 1)
            #expect(
                (after["runloopd_http_request_duration_seconds_count{route=\"/api/threads/{id}/run\"}"] ?? 0) == 1)
        }
    }

    @Test("429 from a limit says why in the metrics")
    func refusalsCounted() async throws {
        try await RunLoopd.with(["--max-threads", "1"]) { server in
            let c = server.client
            _ = try await c.createThread()
            let refused = try await c.post("/api/threads", [:])
            #expect(refused.status == 429)
            #expect(refused.header("Retry-After") == "1")
            let scraped = try await c.get("/metrics")
            let text = String(decoding: scraped.body, as: UTF8.self)
            #expect(text.contains("runloopd_limit_refusals_total{reason=\"too_many_threads\"} 1"))
        }
    }

    @Test("runloopd healthcheck exits 0 against a live server and 1 against a closed port")
    func healthcheckSubcommand() async throws {
        func exitCode(_ port: UInt16) async throws -> Int32? {
            try await RunLoopd.runToExit(["healthcheck", "--port", String(port), "--timeout", "5"]).0
        }
        let live = try await RunLoopd.with { server in try await exitCode(server.port) }
        #expect(live == 0)
        let closed = try await exitCode(1)
        #expect(closed == 1)
    }
}
