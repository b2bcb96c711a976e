import Foundation
import RunLoopCore
import RunLoopServer
import MicroHTTP
import Testing
import RunLoopTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// Issue 12 against the real binary: a foreign page (Origin), a rebound DNS
/// name (Host) and an open network bind are refused, and change nothing.
@Suite("E2E security")
struct E2ESecurityTests {
    static let evil = [("Origin", "http://evil.example")]

    private func threadCount(_ c: E2EClient) async throws -> Int {
        let list = try await c.get("/api/threads")
        #expect(list.status == 200)
        return list["threads"].items.count
    }

    private func expectRefused(_ r: TestHTTPResponse, _ status: Int, _ code: String, _ field: String?) {
        #expect(r.status == status, "\(r)")
        #expect(r["error"]["code"] == .string(code), "\(r)")
        #expect(r["error"]["field"] == (field.map { .string($0) } ?? .null), "\(r)")
        #expect(r.header("Content-Type") == "application/json")
        #expect(r.header("Access-Control-Allow-Origin") == nil)
    }

    @Test("the issue's curls: a foreign Origin or Host is refused with a JSON error and changes nothing")
    func issueCurls() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let t1 = try await c.createThread(["name": "victim"])
            try await c.waitUntilWaiting(t1)
            #expect(try await threadCount(c) == 1)

            let create = try await c.send("POST", "/api/threads", headers: Self.evil)
            expectRefused(create, 403, "forbidden_origin", "Origin")
            #expect((create["error"]["message"].string ?? "").contains("--allowed-origin"))
            let stop = try await c.send("POST", "/api/threads/\(t1)/stop", headers: Self.evil)
            expectRefused(stop, 403, "forbidden_origin", "Origin")
            let wake = try await c.send("POST", "/api/threads/\(t1)/wakeup", headers: Self.evil)
            expectRefused(wake, 403, "forbidden_origin", "Origin")
            let end = try await c.send("DELETE", "/api/threads/\(t1)", headers: Self.evil)
            expectRefused(end, 403, "forbidden_origin", "Origin")
            // The same with a JSON body (a fetch with mode no-cors sends text/plain; this is the worst case).
            let withBody = try await c.send(
                "POST", "/api/threads", body: Array(#"{"name":"evil"}"#.utf8), contentType: "application/json",
                headers: Self.evil)
            expectRefused(withBody, 403, "forbidden_origin", "Origin")

            let read = try await c.send("GET", "/api/threads", headers: [("Host", "evil.example")])
            expectRefused(read, 421, "misdirected_host", "Host")
            #expect(!read.text.contains("victim"))
            #expect((read["error"]["message"].string ?? "").contains("--allowed-host"))
            let rebound = try await c.send("POST", "/api/threads", headers: [("Host", "evil.example:\(server.port)")])
            expectRefused(rebound, 421, "misdirected_host", "Host")
            let reboundStop = try await c.send(
                "POST", "/api/threads/\(t1)/stop",
                headers: [("Host", "evil.example:\(server.port)"), ("Origin", "http://evil.example:\(server.port)")])
            expectRefused(reboundStop, 421, "misdirected_host", "Host")

            // Nothing changed: one thread, never stopped, still alive.
            #expect(try await threadCount(c) == 1)
            let snapshot = try await c.get("/api/threads/\(t1)")
            #expect(snapshot.status == 200)
            #expect(snapshot["exits"]["stopped"] == 0)
            #expect(snapshot["endedAt"] == .null)
        }
    }

    @Test("Origin: null (sandboxed frame, file:), a foreign Referer, other ports and schemes are refused")
    func otherForeignSources() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let sources: [(String, String)] = [
                ("Origin", "null"), ("Referer", "http://evil.example/page.html"),
                ("Origin", "http://127.0.0.1:\(server.port == 1 ? 2 : 1)"), ("Origin", "http://localhost"),
                ("Origin", "chrome-extension://abcdef"), ("Origin", "http://127.0.0.1.evil.example:\(server.port)"),
            ]
            for (name, value) in sources {
                let r = try await c.send("POST", "/api/threads", headers: [(name, value)])
                expectRefused(r, 403, "forbidden_origin", name)
            }
            #expect(try await threadCount(c) == 0)
        }
    }

    @Test("a repeated Host (400), Origin or Referer (403) is refused in either order")
    func repeatedFields() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let own = "http://127.0.0.1:\(server.port)"
            let cases: [[(String, String)]] = [
                [("Host", "127.0.0.1"), ("Host", "evil.example")], [("Host", "evil.example"), ("Host", "127.0.0.1")],
                [("Origin", own), ("Origin", "http://evil.example")],
                [("Origin", "http://evil.example"), ("Origin", own)],
                [("Referer", own + "/"), ("Referer", "http://evil.example/")],
            ]
            for headers in cases {
                let r = try await c.send("POST", "/api/threads", headers: headers)
                // Two Host fields break RFC 9112's framing (400 bad_host); two Origins are a foreign origin.
                #expect(r.status == (headers[0].0 == "Host" ? 400 : 403), "\(headers): \(r)")
            }
            #expect(try await threadCount(c) == 0)
        }
    }

    @Test("the dashboard's own origin, plain curl and reads from anywhere work as before")
    func ownOriginAndCurl() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let port = server.port
            // curl: neither Origin nor Referer.
            let plain = try await c.createThread(["name": "curl"])
            // Same-origin pages under each loopback name; the Host names the port the page used.
            let pages: [(host: String, origin: String)] = [
                ("127.0.0.1:\(port)", "http://127.0.0.1:\(port)"), ("localhost:\(port)", "http://localhost:\(port)"),
                ("LocalHost.:\(port)", "http://localhost:\(port)"), ("[::1]:\(port)", "http://[::1]:\(port)"),
            ]
            for page in pages {
                let r = try await c.send(
                    "POST", "/api/threads", body: Array("{}".utf8), contentType: "application/json",
                    headers: [("Host", page.host), ("Origin", page.origin)])
                #expect(r.status == 201, "\(page): \(r)")
            }
            // Reads carry no CORS headers for a foreign page, but are answered (the browser withholds them).
            let read = try await c.send("GET", "/api/threads", headers: Self.evil)
            #expect(read.status == 200)
            #expect(read.header("Access-Control-Allow-Origin") == nil)
            #expect(try await threadCount(c) == 1 + pages.count)
            // Another loopback name or address on the same port is another origin
            // (it may be another server's page): refused, nothing created.
            for (host, origin) in [
                ("localhost:\(port)", "http://127.0.0.1:\(port)"), ("127.0.0.1:\(port)", "http://[::1]:\(port)"),
                ("[::1]:\(port)", "http://127.0.0.1:\(port)"), ("127.0.0.1:\(port)", "http://localhost:\(port)"),
            ] {
                let r = try await c.send(
                    "POST", "/api/threads", body: Array("{}".utf8), contentType: "application/json",
                    headers: [("Host", host), ("Origin", origin)])
                expectRefused(r, 403, "forbidden_origin", "Origin")
            }
            #expect(try await threadCount(c) == 1 + pages.count)
            let referred = try await c.send(
                "DELETE", "/api/threads/\(plain)",
                headers: [("Host", "127.0.0.1:\(port)"), ("Referer", "http://127.0.0.1:\(port)/index.html")])
            #expect(referred.status == 200, "\(referred)")
        }
    }

    @Test("HTTP limits: too many query parameters 414, too many headers 431, at once; control bytes escaped in the log")
    func requestLimits() async throws {
        let server = try await ServerProcess.started(["--log-level", "info"])
        defer { server.stop() }
        let c = server.client
        let query = (0..<1200).map { "a\($0)=1" }.joined(separator: "&")
        let long = try await c.send("GET", "/api/threads?" + query)
        expectRefused(long, 414, "too_many_parameters", nil)
        let headers = (0..<150).map { ("X-Filler-\($0)", "1") }
        let many = try await c.send("GET", "/healthz", headers: headers)
        expectRefused(many, 431, "too_many_headers", nil)
        let probe = try await c.get("/healthz")
        #expect(probe.status == 200)
        // A terminal escape and a carriage return in the request line reach the log escaped.
        _ = try await c.send("GET", "/\u{1B}[2J")
        _ = try await c.send("GET", "/x\rFAKE 200")
        server.send(signal: SIGTERM)
        #expect(await server.exited(timeout: ServerProcess.startTimeout) == 0)
        let log = server.log
        #expect(!log.contains("\u{1B}") && !log.contains("\r"), "raw control bytes in the log")
        #expect(log.contains("GET /\\x1b[2J 404"), "\(log)")
        #expect(log.contains("GET /x\\x0dFAKE 200 404"), "\(log)")
    }

    @Test("Host: loopback names with any port, /healthz too; HTTP/1.0 without Host passes")
    func hostAllowList() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            for host in ["localhost", "localhost:1", "127.0.0.1:65535", "[::1]", "[::1]:8080", "LOCALHOST."] {
                let r = try await c.send("GET", "/api/version", headers: [("Host", host)])
                #expect(r.status == 200, "\(host): \(r)")
            }
            for path in ["/healthz", "/readyz", "/metrics", "/", "/api/version", "/api/events"] {
                let r = try await c.send("GET", path, headers: [("Host", "attacker.example")])
                #expect(r.status == 421, "\(path): \(r)")
                #expect(r["error"]["code"] == "misdirected_host")
            }
            let socket = try TestHTTPConnection(port: server.port, timeout: 10)
            _ = socket.write(Array("GET /api/version HTTP/1.0\r\n\r\n".utf8))
            var data: [UInt8] = []
            while case let chunk = try socket.read(), !chunk.isEmpty { data += chunk }
            #expect(HTTPWire.parseHead(data)?.status == 200, "\(String(decoding: data, as: UTF8.self))")
        }
    }

    @Test("--allowed-host and RUNLOOPD_ALLOWED_HOST add names; '*' turns the check off with a warning")
    func allowedHostFlags() async throws {
        try await ServerProcess.with(["--allowed-host", "Runloopd.Example", "--allowed-host", "10.0.0.9"]) { server in
            let c = server.client
            for host in ["runloopd.example:\(server.port)", "10.0.0.9"] {
                #expect(try await c.send("GET", "/api/version", headers: [("Host", host)]).status == 200)
            }
            #expect(try await c.send("GET", "/api/version", headers: [("Host", "other.example")]).status == 421)
            // Its own origin under that name may change state.
            let r = try await c.send(
                "POST", "/api/threads",
                headers: [
                    ("Host", "runloopd.example:\(server.port)"), ("Origin", "http://runloopd.example:\(server.port)"),
                ])
            #expect(r.status == 201, "\(r)")
        }
        let fromEnv = try await ServerProcess.started(environment: ["RUNLOOPD_ALLOWED_HOST": "a.example, b.example"])
        defer { fromEnv.stop() }
        for host in ["a.example", "b.example"] {
            #expect(try await fromEnv.client.send("GET", "/api/version", headers: [("Host", host)]).status == 200)
        }
        try await ServerProcess.with(["--allowed-host", "*"]) { server in
            let foreignHost = try await server.client.send("GET", "/api/version", headers: [("Host", "evil.example")])
            #expect(foreignHost.status == 200)
            #expect(server.log.contains("--allowed-host '*'"))
            // Origins are still checked.
            let foreignOrigin = try await server.client.send("POST", "/api/threads", headers: Self.evil)
            #expect(foreignOrigin.status == 403)
        }
    }

    @Test("preflight: no CORS headers for a foreign origin; exactly the API's methods and headers for an allowed one")
    func preflight() async throws {
        let dash = "https://dash.example:8443"
        try await ServerProcess.with(["--allowed-origin", dash, "--token", "t0ken-0123456789abcdef"]) { server in
            let c = server.client
            let ask = [("Access-Control-Request-Method", "POST"), ("Access-Control-Request-Headers", "content-type")]
            let foreign = try await c.send("OPTIONS", "/api/threads", headers: Self.evil + ask)
            expectRefused(foreign, 403, "forbidden_origin", "Origin")
            #expect(foreign.header("Access-Control-Allow-Methods") == nil)
            // Preflights never carry the token: answered without it.
            let allowed = try await c.send("OPTIONS", "/api/threads", headers: [("Origin", dash)] + ask)
            #expect(allowed.status == 204, "\(allowed)")
            #expect(allowed.header("Access-Control-Allow-Origin") == dash)
            #expect(allowed.header("Access-Control-Allow-Methods") == "GET, POST, DELETE")
            #expect(allowed.header("Access-Control-Allow-Headers") == "Authorization, Content-Type, X-Request-Id")
            #expect(allowed.header("Access-Control-Allow-Credentials") == nil)
            // The real request from that origin: CORS headers on the answer, and the token still needed.
            let anonymous = try await c.send("POST", "/api/threads", headers: [("Origin", dash)])
            #expect(anonymous.status == 401)
            let created = try await c.send(
                "POST", "/api/threads", headers: [("Origin", dash), ("Authorization", "Bearer t0ken-0123456789abcdef")])
            #expect(created.status == 201, "\(created)")
            #expect(created.header("Access-Control-Allow-Origin") == dash)
            #expect(created.header("Vary") == "Origin")
            // An OPTIONS that is not a preflight is what it was: 405 with Allow.
            let plain = try await c.send(
                "OPTIONS", "/api/threads", headers: [("Authorization", "Bearer t0ken-0123456789abcdef")])
            #expect(plain.status == 405)
        }
    }

    @Test("security headers: the dashboard's CSP on static files, nosniff and a closed CSP on the API and probes")
    func securityHeaders() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            for path in ["/", "/index.html", "/js/main.js", "/style.css"] {
                let r = try await c.get(path)
                #expect(r.status == 200, "\(path)")
                #expect(r.header("Content-Security-Policy") == SecurityHeaders.dashboardPolicy, "\(path)")
                #expect(r.header("Content-Security-Policy")?.contains("'unsafe-inline'") == false)
                #expect(r.header("X-Frame-Options") == "DENY")
                #expect(r.header("Referrer-Policy") == "no-referrer")
                #expect(r.header("X-Content-Type-Options") == "nosniff")
                #expect(r.headers.filter { $0.0.lowercased() == "x-content-type-options" }.count == 1)
            }
            for path in ["/api/version", "/api/threads", "/api/nope", "/healthz", "/metrics"] {
                let r = try await c.get(path)
                #expect(r.header("X-Content-Type-Options") == "nosniff", "\(path)")
                #expect(r.header("Content-Security-Policy") == "default-src 'none'; frame-ancestors 'none'", "\(path)")
                #expect(r.header("X-Frame-Options") == "DENY")
            }
        }
    }

    @Test("the OpenAPI document lists 421 everywhere, 401 on /api, 403 on every POST and DELETE and the stream")
    func openAPIStatuses() async throws {
        try await ServerProcess.with { server in
            let document = try await server.client.get("/api/openapi.json").json
            let paths = try #require(document["paths"].object)
            var operations = 0
            for (path, item) in paths {
                for (method, operation) in item.object ?? [:] where method != "parameters" {
                    let responses = operation["responses"].object ?? [:]
                    operations += 1
                    #expect(responses["421"] != nil, "\(method) \(path)")
                    #expect((responses["401"] != nil) == path.hasPrefix("/api/"), "\(method) \(path)")
                    // An event stream claims a place in a budget: its Origin is checked like a change's.
                    let guarded = method == "post" || method == "delete" || path == "/api/events"
                    #expect((responses["403"] != nil) == guarded, "\(method) \(path)")
                }
            }
            #expect(operations > 40)
            for name in ["Unauthorized", "Forbidden", "MisdirectedRequest"] {
                #expect(document["components"]["responses"][name]["content"].object != nil, "\(name)")
            }
            #expect(document["components"]["headers"]["WWW-Authenticate"].object != nil)
        }
    }

    @Test("a request without the token gets its 401 on the HTTP thread: no control-loop job, still counted by route")
    func unauthenticatedNeverQueued() async throws {
        try await ServerProcess.with(["--token", "sixteen-chars-16"]) { server in
            /// The control loop's jobs so far: one wake-up latency sample per job it runs.
            func jobs() async throws -> Double {
                let text = try await server.client.get("/metrics").text
                let line = text.split(separator: "\n").first { $0.hasPrefix("runloopd_wakeup_latency_seconds_count") }
                return try #require(line.flatMap { $0.split(separator: " ").last }.flatMap { Double($0) })
            }
            let before = try await jobs()
            for _ in 0..<10 {
                #expect(try await server.client.get("/api/threads").status == 401)
                #expect(try await server.client.post("/api/threads", [:]).status == 401)
            }
            #expect(try await jobs() == before)
            let authorized = try await server.client.send(
                "GET", "/api/threads", headers: [("Authorization", "Bearer sixteen-chars-16")])
            #expect(authorized.status == 200)
            #expect(try await jobs() == before + 1)
            let metrics = try await server.client.get("/metrics").text
            #expect(metrics.contains("runloopd_http_requests_total{route=\"/api/threads\",status=\"401\"} 20"))
        }
    }

}
