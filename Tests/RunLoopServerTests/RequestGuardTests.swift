@testable import MicroHTTP
import Testing

@testable import RunLoopServer

/// The Host and Origin rules as pure logic: every edge the HTTP tests do not
/// reach cheaply (IPv6 forms, trailing dots, default ports, Referer, null).
@Suite("RequestGuard")
struct RequestGuardTests {
    private static let port: UInt16 = 8080

    private func loopback(hosts: [String] = [], origins: [String] = []) throws -> RequestGuard {
        try RequestGuard(boundHost: "127.0.0.1", allowedHosts: hosts, allowedOrigins: origins)
    }

    private func code(_ verdict: RequestGuard.Verdict) -> String? {
        if case .refuse(_, let code, _, _) = verdict { return code.rawValue }
        return nil
    }

    private func status(_ verdict: RequestGuard.Verdict) -> Int? {
        if case .refuse(let status, _, _, _) = verdict { return status }
        return nil
    }

    @Test(
        "Host: loopback names and literals pass with any port, case-insensitive, one trailing dot ignored",
        arguments: [
            "localhost", "localhost:8080", "LOCALHOST:1", "localhost.", "localhost.:8080", "127.0.0.1",
            "127.0.0.1:9", "[::1]", "[::1]:8080", "[0:0:0:0:0:0:0:1]:8080", "[::0001]",
        ])
    func loopbackHostsPass(host: String) throws {
        #expect(try loopback().check(method: "GET", host: host, origin: nil, referer: nil) == .allow)
    }

    @Test(
        "Host: anything else is 421 misdirected_host naming --allowed-host",
        arguments: [
            "evil.example", "evil.example:8080", "localhost.evil.example", "127.0.0.1.nip.io", "localhost..",
            "127.0.0.2", "10.0.0.1:8080", "[::2]", "::1", "[::1", "localhost:", "localhost:65536", "localhost:80:80",
            "local host", "localhost/x", "user@localhost", "2130706433", "[fe80::1%25eth0]", "é.example",
        ])
    func foreignHostsAreRefused(host: String) throws {
        let verdict = try loopback().check(method: "GET", host: host, origin: nil, referer: nil)
        #expect(status(verdict) == 421)
        #expect(code(verdict) == "misdirected_host")
        if case .refuse(_, _, let message, let field) = verdict {
            #expect(message.contains("--allowed-host"))
            #expect(field == "Host")
        }
    }

    @Test("Host: a missing or empty Host (HTTP/1.0, never a browser) passes")
    func missingHost() throws {
        let guardian = try loopback()
        #expect(guardian.check(method: "GET", host: nil, origin: nil, referer: nil) == .allow)
        #expect(guardian.check(method: "POST", host: "", origin: nil, referer: nil) == .allow)
    }

    @Test("Host: --allowed-host names (normalized), the bound name, and '*'")
    func allowedHosts() throws {
        let guardian = try RequestGuard(
            boundHost: "runloopd.internal", allowedHosts: ["Dash.Example.", "192.168.1.5", "[fd00::5]", "::6"])
        for host in [
            "dash.example", "DASH.example:443", "dash.example.", "runloopd.internal:8080", "192.168.1.5:8080",
            "[fd00::5]:1", "[::6]",
        ] {
            #expect(guardian.check(method: "GET", host: host, origin: nil, referer: nil) == .allow)
        }
        #expect(
            code(guardian.check(method: "GET", host: "other.example", origin: nil, referer: nil)) != nil)
        let open = try loopback(hosts: ["*"])
        #expect(open.allowsAnyHost)
        #expect(open.check(method: "GET", host: "evil.example", origin: nil, referer: nil) == .allow)
    }

    @Test("Host: bound to a wildcard, any IP literal passes (probes by pod IP); names still do not")
    func wildcardBinding() throws {
        for bound in ["0.0.0.0", "::", "[::]"] {
            let guardian = try RequestGuard(boundHost: bound)
            for host in ["10.1.2.3:8080", "[fd00::1]:8080", "192.168.0.7", "localhost:8080"] {
                #expect(guardian.check(method: "GET", host: host, origin: nil, referer: nil) == .allow)
            }
            #expect(
                status(guardian.check(method: "GET", host: "evil.example", origin: nil, referer: nil))
                    == 421)
        }
        let specific = try RequestGuard(boundHost: "192.168.1.5")
        #expect(
            specific.check(method: "GET", host: "192.168.1.5:8080", origin: nil, referer: nil) == .allow)
        #expect(
            status(specific.check(method: "GET", host: "10.0.0.1", origin: nil, referer: nil)) == 421)
    }

    @Test("Origin: the server's own origin passes state-changing methods")
    func ownOrigin() throws {
        let guardian = try loopback()
        let cases: [(host: String?, origin: String)] = [
            ("127.0.0.1:8080", "http://127.0.0.1:8080"),
            ("localhost:8080", "http://LOCALHOST:8080"),
            ("[::1]:8080", "http://[::1]:8080"),
            ("[::1]:9000", "http://[0::1]:9000"),  // same host and port as Host (a port mapping)
            ("localhost", "http://localhost"),  // no port: 80
        ]
        for (host, origin) in cases {
            for method in ["POST", "PUT", "PATCH", "DELETE"] {
                #expect(
                    guardian.check(method: method, host: host, origin: origin, referer: nil)
                        == .allow, "\(method) Host \(host ?? "-") Origin \(origin)")
            }
        }
    }

    @Test(
        "Origin: another loopback name or address on the same port is another origin (another server's page)",
        arguments: [
            ("127.0.0.1:8080", "http://[::1]:8080"), ("[::1]:8080", "http://127.0.0.1:8080"),
            ("127.0.0.1:8080", "http://localhost:8080"), ("localhost:8080", "http://127.0.0.1:8080"),
            ("[::1]:8080", "http://localhost:8080"), ("127.0.0.1:8080", "http://127.0.0.2:8080"),
        ])
    func otherLoopbackOrigins(host: String, origin: String) throws {
        let guardian = try loopback()
        for method in ["POST", "DELETE", "OPTIONS"] {
            let verdict = guardian.check(method: method, host: host, origin: origin, referer: nil)
            #expect(code(verdict) == "forbidden_origin", "\(method) Host \(host) Origin \(origin)")
        }
        // Without a Host (HTTP/1.0) no origin is this server's own.
        #expect(
            code(guardian.check(method: "POST", host: nil, origin: origin, referer: nil))
                == "forbidden_origin")
    }

    @Test(
        "Origin: foreign, null, other ports or schemes are 403 forbidden_origin on state-changing methods",
        arguments: [
            "http://evil.example", "null", "http://127.0.0.1:3000", "http://localhost:8081", "https://127.0.0.1:3000",
            "http://127.0.0.1", "file://", "chrome-extension://abc", "http://127.0.0.1:8080/",
            "http://a@127.0.0.1:8080",
            "", "garbage", "http://evil.example:8080",
        ])
    func foreignOrigins(origin: String) throws {
        let guardian = try loopback()
        for method in ["POST", "PUT", "PATCH", "DELETE", "PROPFIND"] {
            let verdict = guardian.check(
                method: method, host: "127.0.0.1:8080", origin: origin, referer: nil)
            #expect(status(verdict) == 403, "\(method) \(origin)")
            #expect(code(verdict) == "forbidden_origin")
            if case .refuse(_, _, let message, let field) = verdict {
                #expect(field == "Origin")
                #expect(message.contains("--allowed-origin"))
            }
        }
        // Reads are the browser's business (no CORS headers): they pass.
        for method in ["GET", "HEAD"] {
            #expect(
                guardian.check(method: method, host: "127.0.0.1:8080", origin: origin, referer: nil)
                    == .allow)
        }
    }

    @Test("Referer stands in for a missing Origin; neither header passes (curl)")
    func referer() throws {
        let guardian = try loopback()
        let host = "127.0.0.1:8080"
        #expect(
            guardian.check(
                method: "POST", host: host, origin: nil, referer: "http://127.0.0.1:8080/x?y#z")
                == .allow)
        let foreign = guardian.check(
            method: "POST", host: host, origin: nil, referer: "http://evil.example/page")
        #expect(code(foreign) == "forbidden_origin")
        if case .refuse(_, _, _, let field) = foreign { #expect(field == "Referer") }
        #expect(code(guardian.check(method: "POST", host: host, origin: nil, referer: "null")) != nil)
        // The Origin wins over the Referer.
        #expect(
            code(
                guardian.check(
                    method: "POST", host: host, origin: "http://evil.example", referer: "http://127.0.0.1:8080/"))
                == "forbidden_origin")
        #expect(guardian.check(method: "POST", host: host, origin: nil, referer: nil) == .allow)
    }

    @Test("repeated fields (joined with \", \" by the HTTP layer) are never accepted, in either order")
    func joinedValues() throws {
        let guardian = try loopback()
        let own = "http://127.0.0.1:8080"
        for host in ["127.0.0.1, evil.example", "evil.example, 127.0.0.1", "localhost, localhost"] {
            #expect(code(guardian.check(method: "GET", host: host, origin: nil, referer: nil)) != nil)
        }
        for origin in ["\(own), http://evil.example", "http://evil.example, \(own)", "\(own), \(own)"] {
            let verdict = guardian.check(
                method: "POST", host: "127.0.0.1:8080", origin: origin, referer: nil)
            #expect(code(verdict) == "forbidden_origin", "\(origin)")
        }
        for referer in ["\(own)/, http://evil.example/", "\(own)/a b", "\(own)/\t"] {
            let verdict = guardian.check(
                method: "POST", host: "127.0.0.1:8080", origin: nil, referer: referer)
            #expect(code(verdict) == "forbidden_origin", "\(referer)")
        }
    }

    @Test("--allowed-origin: allowed to change state and given CORS headers; same-origin gets none")
    func allowedOrigins() throws {
        let guardian = try loopback(origins: ["https://Dash.Example:443", "http://[::1]:3000"])
        let host = "127.0.0.1:8080"
        for origin in ["https://dash.example", "https://dash.example:443", "http://[::1]:3000"] {
            #expect(guardian.check(method: "POST", host: host, origin: origin, referer: nil) == .allow)
            let cors = guardian.corsHeaders(origin: origin, host: host)
            #expect(cors.first { $0.0 == "Access-Control-Allow-Origin" }?.1 == origin)
        }
        #expect(
            code(
                guardian.check(method: "POST", host: host, origin: "http://dash.example", referer: nil)
            ) != nil)
        #expect(guardian.corsHeaders(origin: "http://evil.example", host: host).isEmpty)
        #expect(guardian.corsHeaders(origin: "http://127.0.0.1:8080", host: host).isEmpty)
        #expect(guardian.corsHeaders(origin: nil, host: host).isEmpty)
    }

    @Test("Preflight: OPTIONS with an Origin is checked like a state change; allowed ones get exact CORS headers")
    func preflight() throws {
        let guardian = try loopback(origins: ["https://dash.example"])
        let refused = guardian.check(
            method: "OPTIONS", host: "127.0.0.1:8080", origin: "http://evil.example", referer: nil)
        #expect(status(refused) == 403)
        #expect(
            guardian.check(
                method: "OPTIONS", host: "127.0.0.1:8080", origin: "https://dash.example", referer: nil
            )
                == .allow)
        #expect(
            guardian.check(method: "OPTIONS", host: "127.0.0.1:8080", origin: nil, referer: nil)
                == .allow)
        let headers = Dictionary(uniqueKeysWithValues: guardian.preflightHeaders(origin: "https://dash.example"))
        #expect(headers["Access-Control-Allow-Origin"] == "https://dash.example")
        #expect(headers["Access-Control-Allow-Methods"] == "GET, POST, DELETE")
        #expect(headers["Access-Control-Allow-Headers"] == "Authorization, Content-Type, X-Request-Id")
        #expect(headers["Access-Control-Allow-Credentials"] == nil)
    }

    @Test("Configuration: malformed --allowed-host / --allowed-origin values are refused by name")
    func badConfiguration() {
        for host in ["http://x", "x:80", "[::1]:80", "a b", ""] {
            #expect(throws: RequestGuard.ConfigurationError.self) {
                try RequestGuard(boundHost: "::1", allowedHosts: [host])
            }
        }
        for origin in ["dash.example", "ftp://dash.example", "https://dash.example/path", "null", "*", "https://"] {
            #expect(throws: RequestGuard.ConfigurationError.self) {
                try RequestGuard(boundHost: "127.0.0.1", allowedOrigins: [origin])
            }
        }
    }

    @Test("isLoopback: what may run without a token")
    func loopbackBinding() {
        for host in ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost", "LOCALHOST"] {
            #expect(RequestGuard.isLoopback(host), "\(host)")
        }
        for host in ["0.0.0.0", "::", "192.168.1.5", "example.com", "fd00::1", "localhost.example"] {
            #expect(!RequestGuard.isLoopback(host), "\(host)")
        }
    }

    @Test("Security headers: the dashboard's CSP on static files, a closed one elsewhere; existing ones kept")
    func securityHeaders() {
        var page: [(String, String)] = [("X-Content-Type-Options", "nosniff")]
        SecurityHeaders.add(to: &page, dashboard: true)
        let fields = Dictionary(page, uniquingKeysWith: { first, _ in first })
        #expect(page.count == fields.count)
        #expect(
            fields["Content-Security-Policy"]
                == "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
                + "font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
        #expect(fields["Referrer-Policy"] == "no-referrer")
        #expect(fields["X-Frame-Options"] == "DENY")
        var api: [(String, String)] = []
        SecurityHeaders.add(to: &api, dashboard: false)
        #expect(
            Dictionary(uniqueKeysWithValues: api)["Content-Security-Policy"]
                == "default-src 'none'; frame-ancestors 'none'")
    }
}
