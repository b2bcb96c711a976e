import Foundation
import RunLoopCore
import RunLoopServer
import Testing
import RunLoopTestSupport

/// Token auth, read-only mode, Prometheus metrics and the healthcheck
/// subcommand, against the real binary.
@Suite("E2E operations")
struct E2EOperationsTests {
    @Test("SIGHUP rereads a rotated --token-file (the old token stops working) and never stops the process")
    func sighupReloadsTheTokenFile() async throws {
        try await withTemporaryPath("token") { file in
            let (old, new) = ("old-secret-0123456789", "new-secret-9876543210")
            try Data("\(old)\n".utf8).write(to: file)
            let server = try await ServerProcess.started(["--token-file", file.path])
            defer { server.stop() }
            let c = server.client
            func status(_ token: String) async throws -> Int {
                try await c.send("GET", "/api/threads", headers: [("Authorization", "Bearer \(token)")]).status
            }
            #expect(try await status(old) == 200)
            // A rotated secret: the file changes, then SIGHUP.
            #expect(try await server.rotateToken(to: new, in: file), "\(server.log)")
            #expect(!server.log.contains(new) && !server.log.contains(old), "the token itself is never logged")
            #expect(try await status(new) == 200)
            #expect(try await status(old) == 401)
            // A file that now holds a token too short: the current one stays, with a warning.
            try Data("short\n".utf8).write(to: file)
            server.send(signal: SIGHUP)
            #expect(await server.logged(timeout: 10) { $0.contains("SIGHUP: kept the old token") }, "\(server.log)")
            #expect(try await status(new) == 200)
            // Written 0644 (the usual umask): readable by others, warned about at start and on reload.
            #expect(server.log.components(separatedBy: "is readable by every user").count - 1 >= 2, "\(server.log)")
            // Still serving; SIGTERM still stops it cleanly.
            server.send(signal: SIGTERM)
            #expect(await server.exited(timeout: ServerProcess.startTimeout) == 0, "\(server.log)")
        }
    }

    @Test("SIGHUP rereads --log-level-file: the new level takes effect, a bad file keeps it, the process lives")
    func sighupReloadsTheLogLevel() async throws {
        try await withTemporaryPath("level") { file in
            try Data("warning\n".utf8).write(to: file)
            // --log-level says info, the file says warning: the file wins.
            let server = try await ServerProcess.started([
                "--log-level", "info", "--log-level-file", file.path, "--log-format", "json",
            ])
            defer { server.stop() }
            let c = server.client
            func lines() -> [Value] {
                server.log.split(separator: "\n").compactMap { try? JSON.parse(Array($0.utf8)) }
            }
            // At warning, no access line: the marker request leaves no trace.
            _ = try await c.send("GET", "/api/version", headers: [("X-Request-Id", "at-warning")])
            try Data("debug\n".utf8).write(to: file)
            server.send(signal: SIGHUP)
            #expect(
                await server.logged(timeout: 10) { $0.contains("SIGHUP: reloaded") }, "\(server.log)")
            let reload = try #require(lines().first { $0["msg"] == "SIGHUP: reloaded" })
            #expect(reload["logLevelBefore"] == "warning")
            #expect(reload["logLevel"] == "debug")
            #expect(reload["logLevelChanged"] == .bool(true))
            #expect(reload["token"] == "not from --token-file")
            // Now at debug: a probe's access line (debug) appears.
            _ = try await c.send("GET", "/healthz", headers: [("X-Request-Id", "at-debug")])
            #expect(await server.logged(timeout: 10) { $0.contains("at-debug") }, "\(server.log)")
            let probe = lines().first { $0["requestId"] == "at-debug" }
            #expect(probe?["level"] == "debug")
            #expect(!server.log.contains("at-warning"), "no access line was written at warning")
            // A file naming no level: the level stays, with a warning.
            try Data("loud\n".utf8).write(to: file)
            server.send(signal: SIGHUP)
            #expect(await server.logged(timeout: 10) { $0.contains("SIGHUP: kept the log level") }, "\(server.log)")
            _ = try await c.send("GET", "/healthz", headers: [("X-Request-Id", "still-debug")])
            #expect(await server.logged(timeout: 10) { $0.contains("still-debug") }, "\(server.log)")
            #expect(server.output.value.exitStatus == nil, "SIGHUP never stops the process")
            server.send(signal: SIGTERM)
            #expect(await server.exited(timeout: ServerProcess.startTimeout) == 0, "\(server.log)")
        }
    }

    @Test("a --log-level-file that cannot be read refuses the start")
    func unreadableLogLevelFile() async throws {
        let (status, output) = try await ServerProcess.runToExit([
            "serve", "--port", "0", "--no-store", "--log-level-file", "/nonexistent/level",
        ])
        #expect(status == 1, "\(output)")
        #expect(output.contains("cannot read --log-level-file"), "\(output)")
    }

    @Test("--log-format json: a bad flag is one JSON line at error, exit 64")
    func argumentErrorsInJSON() async throws {
        let (status, output) = try await ServerProcess.runToExit(["serve", "--log-format", "json", "--port", "seventy"])
        #expect(status == 64, "\(output)")
        let lines = output.split(separator: "\n")
        #expect(lines.count == 1, "\(output)")
        let line = (try? JSON.parse(Array((lines.first ?? "").utf8))) ?? .null
        #expect(line["level"] == "error", "\(output)")
        #expect(line["msg"].string?.contains("seventy") == true, "\(output)")
        #expect(line["exitCode"] == .number(64))
        // Text stays ArgumentParser's own.
        let (textStatus, text) = try await ServerProcess.runToExit(["serve", "--port", "seventy"])
        #expect(textStatus == 64)
        #expect(text.contains("Usage:"), "\(text)")
    }

    @Test("a severe stall is logged at warning (each threshold crossed), its end at info")
    func stallsAreLogged() async throws {
        try await ServerProcess.with(["--log-format", "json", "--no-store"]) { server in
            let c = server.client
            let thread = try await c.createThread()
            let answer = try await c.post(
                "/api/threads/\(thread)/perform", ["selector": "sleep", "args": ["ms": 600], "waitUntilDone": true])
            #expect(answer.status == 200)
            #expect(await server.logged(timeout: 10) { $0.contains("stall ended") }, "\(server.log)")
            let lines = server.log.split(separator: "\n").compactMap { try? JSON.parse(Array($0.utf8)) }
            let stalls = lines.filter { $0["msg"].string?.hasPrefix("stall:") == true }
            #expect(stalls.allSatisfy { $0["level"] == "warning" && $0["thread"] == .string(thread) })
            #expect(stalls.map { $0["severity"] } == ["micro", "hang", "severe"], "\(server.log)")
            #expect(stalls.last?["ms"].number.map { $0 >= 500 } == true)
            let ended = lines.first { $0["msg"].string?.hasPrefix("stall ended") == true }
            #expect(ended?["level"] == "info")
        }
    }

    @Test("--token: /api needs the bearer token (401 + WWW-Authenticate); probes stay open")
    func tokenAuth() async throws {
        try await ServerProcess.with(["--token", "s3cret-token-0123456789"]) { server in
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
        try await ServerProcess.with(["--read-only"]) { server in
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

    @Test("X-Request-Id is echoed, or one is made up: a per-boot prefix and a counter, unlike another boot's")
    func requestIds() async throws {
        func madeIds() async throws -> [String] {
            try await ServerProcess.with(["--no-store"]) { server in
                let c = server.client
                let given = try await c.send("GET", "/api/version", headers: [("X-Request-Id", "abc-123")])
                #expect(given.header("X-Request-Id") == "abc-123")
                var ids: [String] = []
                for _ in 0..<2 { ids.append(try await c.get("/healthz").header("X-Request-Id") ?? "") }
                return ids
            }
        }
        let first = try await madeIds()
        let second = try await madeIds()
        for id in first + second {
            let parts = id.split(separator: "-")
            #expect(parts.count == 2 && parts[0].count == 8 && Int(parts[1]) != nil, "\(id)")
        }
        let prefixes = (first + second).map { $0.split(separator: "-").first.map(String.init) ?? "" }
        #expect(prefixes[0] == prefixes[1], "one prefix per boot")
        #expect(prefixes[0] != prefixes[2], "another boot, another prefix")
        #expect(Set(first + second).count == 4)
    }

    @Test("--log-format json: every log line is one JSON object, access lines carry the request id")
    func jsonLogs() async throws {
        try await ServerProcess.with(["--log-format", "json"]) { server in
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
            #expect(access?["status"] == .number(200))
            #expect(access?["durationMs"].number != nil)
            #expect(access?["level"] == "info")
            // Numbers are numbers in every line: the listening line's port.
            let listening = lines.compactMap { try? JSON.parse(Array($0.utf8)) }.first {
                $0["msg"] == "runloopd listening"
            }
            #expect(listening?["port"] == .number(Double(server.port)))
        }
    }

    @Test("/metrics: Prometheus text whose values move after real work")
    func metricsMove() async throws {
        try await ServerProcess.with { server in
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
        try await ServerProcess.with(["--max-threads", "1"]) { server in
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
            try await ServerProcess.runToExit(["healthcheck", "--port", String(port), "--timeout", "5"]).0
        }
        let live = try await ServerProcess.with { server in try await exitCode(server.port) }
        #expect(live == 0)
        let closed = try await exitCode(1)
        #expect(closed == 1)
    }
}
