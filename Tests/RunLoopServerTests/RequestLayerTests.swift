import Foundation
import RunLoopCore
import Testing

#if canImport(Glibc)
    import Glibc
#endif

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
        "dash.example", "dash.example:443", "DASH.example", ":8080",
    ]

    @Test(
        "RequestGuard: the Host shortcut allows exactly what the full parse allows",
        arguments: [("127.0.0.1", [String]()), ("0.0.0.0", ["dash.example"]), ("::", []), ("127.0.0.1", ["*"])])
    func hostShortcut(bound: String, allowed: [String]) throws {
        let guardian = try RequestGuard(boundHost: bound, allowedHosts: allowed)
        for host in Self.hosts {
            // GET takes the shortcut; POST from the same origin takes the full parse (its
            // Origin is compared with the parsed Host) and is then allowed.
            let read = guardian.check(method: "GET", host: host, origin: nil, referer: nil)
            let full = guardian.check(
                method: "POST", host: host, origin: "http://\(host)", referer: nil)
            #expect(read == full, "Host '\(host)' bound to \(bound), allowed \(allowed)")
        }
    }

    static func router() -> RouterResponder {
        let api = API(
            registry: WorkerRegistry(), events: EventHub(maxClients: 1), limits: APILimits(), version: .null,
            journal: Journal(capacity: 1), experiments: ExperimentLibrary(experiments: [], problems: []), openAPI: .null
        )
        return api.makeRouter()
    }

    static func describe(_ match: RouterResponder.Match) -> String {
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

    /// The matching rule stated plainly: every template of the path's length,
    /// segment by segment; most literal segments wins, the first added on a tie.
    static func reference(_ router: RouterResponder, method: String, path: String) -> String {
        let parts = path.split(separator: "/").map(String.init)
        let effective = method == "HEAD" ? "GET" : method
        var best: (template: String, method: String, score: Int)?
        var methods = Set<String>()
        for (routeMethod, template) in router.table {
            let pieces = template.split(separator: "/").map(String.init)
            guard pieces.count == parts.count else { continue }
            var score = 0
            var matches = true
            for (piece, part) in zip(pieces, parts) {
                if piece.hasPrefix("{") {
                    matches = matches && PercentDecoding.isWellFormed(Substring(part))
                } else if piece == part {
                    score += 1
                } else {
                    matches = false
                }
            }
            guard matches else { continue }
            methods.insert(routeMethod)
            if routeMethod == effective, best == nil || score > best!.score { best = (template, routeMethod, score) }
        }
        if let best { return "\(best.method) \(best.template)" }
        if methods.contains("GET") { methods.insert("HEAD") }
        return methods.isEmpty ? "404" : "405 \(methods.sorted())"
    }

    @Test("Router: the segment tree resolves like the plain rule, for every template filled with every word")
    func treeMatchesTheRule() {
        let router = Self.router()
        let words =
            Set(router.table.flatMap { $0.template.split(separator: "/").map(String.init) })
            .filter { !$0.hasPrefix("{") }.sorted() + ["x", "t1", "bad%zz"]
        var checked = 0
        for (_, template) in router.table {
            let pieces = template.split(separator: "/").map(String.init)
            let slots = pieces.indices.filter { pieces[$0].hasPrefix("{") }
            // Each capture filled with each word in turn (the others with "x").
            for slot in slots.isEmpty ? [-1] : slots {
                for word in slot < 0 ? ["x"] : words {
                    var filled = pieces.map { $0.hasPrefix("{") ? "x" : $0 }
                    if slot >= 0 { filled[slot] = word }
                    let path = "/" + filled.joined(separator: "/")
                    for method in ["GET", "HEAD", "POST", "DELETE"] {
                        let got: String
                        switch router.resolve(method: method, path: path) {
                        case .matched(let route, _): got = "\(route.method) \(route.template)"
                        case .methodNotAllowed(let allow): got = "405 \(allow)"
                        case .notFound: got = "404"
                        }
                        #expect(got == Self.reference(router, method: method, path: path), "\(method) \(path)")
                        checked += 1
                    }
                }
            }
        }
        #expect(checked > 1000)
    }

    /// The timestamp as `gmtime_r` and string padding made it before.
    static func referenceTimestamp(_ date: Date) -> String {
        let interval = date.timeIntervalSince1970
        var seconds = time_t(interval.rounded(.down))
        let millis = Int(((interval - interval.rounded(.down)) * 1000).rounded(.down))
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func pad(_ value: Int32, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(Int32(min(millis, 999)), 3))Z"
    }

    @Test("Timestamp: the civil-date arithmetic writes what gmtime_r gives, leap days and centuries included")
    func timestamps() {
        var dates: [Double] = [
            0, -0.001, -1, 951_782_400, 951_868_799.999, 4_107_542_400, -2_203_891_200, 1_764_076_369.806,
            253_402_300_799.999, -62_135_596_800 + 86_400 * 366,
        ]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20_000 { dates.append(Double.random(in: -2_208_988_800...253_402_300_799, using: &generator)) }
        for seconds in dates {
            let date = Date(timeIntervalSince1970: seconds)
            #expect(Timestamp.string(date) == Self.referenceTimestamp(date), "\(seconds)")
        }
    }

    @Test("PeerAddress: IPv4 written by hand reads like inet_ntop; IPv6 is inet_ntop's")
    func peerText() {
        var generator = SystemRandomNumberGenerator()
        var samples: [UInt32] = [0, 0xFFFF_FFFF, 0x7F00_0001, 0x0A00_0001, 0x6400_0A09]
        for _ in 0..<5000 { samples.append(UInt32.random(in: 0...UInt32.max, using: &generator)) }
        for value in samples {
            var address = in_addr(s_addr: value.bigEndian)
            var buffer = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
            let expected = String(cString: inet_ntop(AF_INET, &address, &buffer, socklen_t(buffer.count))!)
            #expect(PeerAddress(storage: .v4(address)).text == expected)
        }
        var loopback = in6_addr()
        #expect(inet_pton(AF_INET6, "::1", &loopback) == 1)
        #expect(PeerAddress(storage: .v6(loopback)).text == "::1")
        #expect(PeerAddress(text: "setup").text == "setup")
    }
}
