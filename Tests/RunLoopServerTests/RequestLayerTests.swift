import RunLoopCore
import Testing

@testable import MicroHTTP
@testable import RunLoopServer

/// The request layer's shortcuts (issue 16's per-request cuts) against the
/// slow paths they stand in for: each must answer exactly what the long way
/// answers.
@Suite("Request layer shortcuts")
struct RequestLayerTests {
    @Test("HTTPHeaders: lookup ignores ASCII case; a repeated field is one comma-joined value")
    func headers() {
        var headers = HTTPHeaders()
        headers.append("Host", "127.0.0.1:8080")
        headers.append("X-Request-Id", "abc")
        headers.append("ORIGIN", "http://a.example")
        headers.append("origin", "http://b.example")
        #expect(headers["host"] == "127.0.0.1:8080")
        #expect(headers["x-request-id"] == "abc")
        #expect(headers["X-REQUEST-ID"] == "abc")
        #expect(headers["origin"] == "http://a.example, http://b.example")
        #expect(headers["referer"] == nil)
        // Same length, differing only outside the letters: not the same name.
        #expect(headers["x_request-id"] == nil)
        #expect(headers.fields.count == 3)
        let literal: HTTPHeaders = ["Content-Type": "application/json"]
        #expect(literal["content-type"] == "application/json")
    }

    static let hosts = [
        "localhost", "localhost:8080", "LOCALHOST:1", "localhost.", "localhost.:8080", "127.0.0.1", "127.0.0.1:9",
        "127.0.0.1:65535", "127.0.0.1:65536", "127.0.0.1:008080", "[::1]", "[::1]:8080", "[0:0:0:0:0:0:0:1]:8080",
        "evil.example", "evil.example:8080", "localhost.evil.example", "127.0.0.1.nip.io", "localhost..", "127.0.0.2",
        "10.0.0.1:8080", "[::2]", "::1", "::1:8080", "[::1", "localhost:", "localhost:65536", "localhost:80:80",
        "local host", "localhost/x", "user@localhost", "2130706433", "é.example", "127.000.000.001", "0x7f.0.0.1",
        "dash.example", "dash.example:443", "DASH.example", ":8080", "",
    ]

    @Test(
        "RequestGuard: a read's Host shortcut allows exactly what the full parse allows",
        arguments: [("127.0.0.1", [String]()), ("0.0.0.0", ["dash.example"]), ("::", []), ("127.0.0.1", ["*"])])
    func hostShortcut(bound: String, allowed: [String]) throws {
        let guardian = try RequestGuard(boundHost: bound, allowedHosts: allowed)
        for host in Self.hosts {
            // GET takes the shortcut; POST without Origin or Referer takes the full parse
            // and is then allowed like any non-browser caller.
            let read = guardian.check(method: "GET", host: host, origin: nil, referer: nil, boundPort: 8080)
            let full = guardian.check(method: "POST", host: host, origin: nil, referer: nil, boundPort: 8080)
            #expect(read == full, "Host '\(host)' bound to \(bound), allowed \(allowed)")
        }
    }

    @Test("JSON object keys: the byte shortcut orders like String's <")
    func keyOrder() {
        let keys = [
            "", "a", "A", "ab", "abc", "b", "Z", "_", "0", "9", "é", "e\u{301}", "ea", "éa", "e", "z", "zz", "ß", "日本",
            "日", "ab\u{301}", "a\u{301}b", "id", "ids", "i", "\u{7f}", "\u{80}", "~", "a b", "a-b",
        ]
        for a in keys {
            for b in keys {
                #expect(
                    JSON.keyPrecedes(a, b) == (a < b),
                    "\(a.unicodeScalars.map(\.value)) vs \(b.unicodeScalars.map(\.value))")
            }
        }
    }

    static func router() -> Router {
        let api = API(
            registry: WorkerRegistry(), events: EventHub(maxClients: 1), limits: APILimits(), version: .null,
            journal: Journal(capacity: 1), experiments: ExperimentLibrary(experiments: [], problems: []), openAPI: .null
        )
        return api.makeRouter()
    }

    static func describe(_ match: Router.Match) -> String {
        switch match {
        case .matched(let route, let params):
            return "\(route.method) \(route.template) \(params.sorted { $0.key < $1.key })"
        case .methodNotAllowed(let allow): return "405 \(allow)"
        case .notFound: return "404"
        }
    }

    @Test("Router: the exact-path table resolves every literal route like the segment match; the rest is unchanged")
    func literalRoutes() {
        let router = Self.router()
        for (method, template) in router.table {
            let match = router.resolve(method: method, path: template)
            guard case .matched(let route, _) = match else {
                Issue.record("\(method) \(template) does not resolve: \(Self.describe(match))")
                continue
            }
            // A template never resolves to a route with more captures than itself.
            #expect(
                route.template == template || template.contains("{"),
                "\(method) \(template) resolved to \(route.template)")
        }
        #expect(Self.describe(router.resolve(method: "GET", path: "/api/version")) == "GET /api/version []")
        #expect(Self.describe(router.resolve(method: "HEAD", path: "/api/version")) == "GET /api/version []")
        #expect(Self.describe(router.resolve(method: "POST", path: "/api/version")) == "405 [\"GET\", \"HEAD\"]")
        #expect(Self.describe(router.resolve(method: "GET", path: "/api//version/")) == "GET /api/version []")
        #expect(Self.describe(router.resolve(method: "GET", path: "/api/versions")) == "404")
        #expect(
            Self.describe(router.resolve(method: "POST", path: "/api/threads/t%201/perform"))
                == "POST /api/threads/{id}/perform [(key: \"id\", value: \"t 1\")]")
        #expect(Self.describe(router.resolve(method: "GET", path: "/api/threads/t%zz")) == "404")
    }
}
