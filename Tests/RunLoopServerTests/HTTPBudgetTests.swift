import Testing

@testable import MicroHTTP
@testable import RunLoopCore
@testable import RunLoopServer

/// Issue 37's HTTP rules as pure logic: RFC 9112 framing (`RequestFraming`),
/// the Origin's scheme and the event stream's Origin check (`RequestGuard`),
/// and the event streams' per-address budget and token binding (`EventHub`).
/// The wire-level attacks run against the real binary in
/// Tests/hardening/test_10_http_budgets.py.
@Suite("HTTP budgets and framing")
struct HTTPBudgetTests {
    private func framing(_ fields: [(String, String)]) -> RequestFraming {
        var framing = RequestFraming()
        for (name, value) in fields { framing.add(name: Array(name.utf8), value: Array(value.utf8)) }
        return framing
    }

    @Test("Content-Length with Transfer-Encoding is 400 ambiguous_framing, in either order and any case")
    func contentLengthAndChunked() {
        for fields in [
            [("Host", "a"), ("Content-Length", "2"), ("Transfer-Encoding", "chunked")],
            [("host", "a"), ("TRANSFER-ENCODING", "chunked"), ("content-length", "0")],
        ] {
            #expect(framing(fields).check(version: "HTTP/1.1")?.code.rawValue == "ambiguous_framing")
        }
        #expect(framing([("Host", "a"), ("Transfer-Encoding", "chunked")]).check(version: "HTTP/1.1") == nil)
    }

    @Test("the declared length: the first Content-Length's digits, Int.max past Int, 0 for other text")
    func declaredLength() {
        #expect(framing([("Host", "a")]).declaredLength == nil)
        #expect(framing([("Content-Length", "512")]).declaredLength == 512)
        #expect(framing([("Content-Length", " 7\t")]).declaredLength == 7)
        #expect(framing([("content-length", "99999999999999999999999")]).declaredLength == Int.max)
        #expect(framing([("Content-Length", "\(Int.max)")]).declaredLength == Int.max)
        #expect(framing([("Content-Length", "12"), ("Content-Length", "30")]).declaredLength == 12)
        for text in ["", "1 2", "-5", "+5", "0x10", "5, 5"] {
            #expect(framing([("Content-Length", text)]).declaredLength == 0, "\(text)")
        }
    }

    @Test("Content-Length values that differ (repeated or listed) are 400; equal ones pass")
    func conflictingLengths() {
        let bad: [[(String, String)]] = [
            [("Host", "a"), ("Content-Length", "2"), ("Content-Length", "30")],
            [("Host", "a"), ("Content-Length", "2, 3")],
            [("Host", "a"), ("Content-Length", "2"), ("content-length", "2,2,4")],
        ]
        for fields in bad {
            #expect(framing(fields).check(version: "HTTP/1.1")?.code.rawValue == "conflicting_content_length")
        }
        #expect(
            framing([("Host", "a"), ("Content-Length", "2"), ("Content-Length", " 2")]).check(version: "HTTP/1.1")
                == nil)
        #expect(framing([("Host", "a"), ("Content-Length", "5")]).check(version: "HTTP/1.1") == nil)
    }

    @Test("Host: missing on HTTP/1.1, repeated, or holding NUL or control bytes is 400 bad_host")
    func hostRules() {
        #expect(framing([]).check(version: "HTTP/1.1")?.code.rawValue == "bad_host")
        #expect(framing([]).check(version: "HTTP/1.0") == nil)
        #expect(framing([("Host", "a"), ("Host", "a")]).check(version: "HTTP/1.0")?.code.rawValue == "bad_host")
        for value in ["127.0.0.1\u{0}evil", "127.0.0.1\u{1}", "a\u{7F}b", "a\tb", "a\rb"] {
            #expect(
                framing([("Host", value)]).check(version: "HTTP/1.1")?.code == .badHost, "\(value.debugDescription)")
        }
        // Blanks around the value are not part of it.
        #expect(framing([("Host", "127.0.0.1 \t")]).check(version: "HTTP/1.1") == nil)
        // A NUL found after the value as libmicrohttpd cut it (the layer marks it).
        var cut = framing([("Accept", "x"), ("Host", "127.0.0.1")])
        cut.hiddenNULInLastValue()
        #expect(cut.check(version: "HTTP/1.1")?.code.rawValue == "bad_host")
        var other = framing([("Host", "127.0.0.1"), ("X-A", "a")])
        other.hiddenNULInLastValue()
        #expect(other.check(version: "HTTP/1.1") == nil)
    }

    @Test("Origin: the scheme is compared; https is own only through a proxy that says so")
    func originScheme() throws {
        let guardian = try RequestGuard(boundHost: "127.0.0.1")
        let host = "127.0.0.1:8080"
        let refused = guardian.check(method: "POST", host: host, origin: "https://127.0.0.1:8080", referer: nil)
        #expect(refused != .allow)
        #expect(guardian.check(method: "POST", host: host, origin: "http://127.0.0.1:8080", referer: nil) == .allow)
        let proxied = guardian.check(
            method: "POST", host: "dash.local", origin: "https://127.0.0.1", referer: nil,
            scheme: RequestGuard.scheme(forwardedProto: "https"))
        #expect(proxied != .allow, "another host is still another origin")
        #expect(
            guardian.check(
                method: "POST", host: "localhost", origin: "https://localhost", referer: nil,
                scheme: RequestGuard.scheme(forwardedProto: " HTTPS ")) == .allow)
        #expect(
            guardian.check(
                method: "POST", host: "localhost", origin: "http://localhost", referer: nil,
                scheme: RequestGuard.scheme(forwardedProto: "https")) != .allow)
        #expect(RequestGuard.scheme(forwardedProto: nil) == "http")
        #expect(RequestGuard.scheme(forwardedProto: "ftp") == "http")
    }

    @Test("GET /api/events checks the page's Origin (guardsRead); a plain GET does not")
    func streamOrigin() throws {
        let guardian = try RequestGuard(boundHost: "127.0.0.1")
        let host = "127.0.0.1:8080"
        let foreign = "http://127.0.0.2:8080"
        #expect(guardian.check(method: "GET", host: host, origin: foreign, referer: nil) == .allow)
        let verdict = guardian.check(method: "GET", host: host, origin: foreign, referer: nil, guardsRead: true)
        guard case .refuse(let status, let code, _, _) = verdict else {
            Issue.record("a foreign page opened a stream")
            return
        }
        #expect(status == 403 && code == .forbiddenOrigin)
        #expect(
            guardian.check(method: "GET", host: host, origin: "http://127.0.0.1:8080", referer: nil, guardsRead: true)
                == .allow)
        #expect(guardian.check(method: "GET", host: host, origin: nil, referer: nil, guardsRead: true) == .allow)
    }

    private func open(_ hub: EventHub, from address: String, token: String? = nil) throws(RunLoopError) -> EventStream?
    {
        var headers = HTTPHeaders()
        if let token { headers.append("Authorization", "Bearer \(token)") }
        let context = RouteContext(
            request: HTTPRequest(method: "GET", path: "/api/events", headers: headers, remoteAddress: address),
            params: [:], respond: { _ in })
        guard case .response(let response) = try hub.open(context, threads: []) else { return nil }
        return response.stream
    }

    @Test("Event streams: a budget per address and one in all, each a 429; a closed stream frees its place")
    func streamBudgets() throws {
        let hub = EventHub(maxClients: 5, maxClientsPerAddress: 2)
        var streams: [EventStream] = []
        for _ in 0..<2 { streams.append(try #require(try open(hub, from: "127.0.0.2"))) }
        do {
            _ = try open(hub, from: "127.0.0.2")
            Issue.record("a third stream from one address was opened past --max-event-clients-per-ip 2")
        } catch {
            #expect(error.code == "too_many_clients_per_ip")
        }
        for address in ["127.0.0.3", "127.0.0.3", "127.0.0.4"] {
            streams.append(try #require(try open(hub, from: address)))
        }
        do {
            _ = try open(hub, from: "127.0.0.5")
            Issue.record("a sixth stream was opened past --max-event-clients 5")
        } catch {
            #expect(error.code == "too_many_clients")
        }
        streams[0].finish(.clientDisconnected)
        #expect(hub.clientCount == 4)
        streams.append(try #require(try open(hub, from: "127.0.0.2")))
        hub.closeAll()
    }

    @Test("Event streams: a token rotated out ends the streams opened with it, not the others")
    func tokenRotation() throws {
        let hub = EventHub(maxClients: 8, maxClientsPerAddress: 0)
        let old = try #require(try open(hub, from: "127.0.0.2", token: "old-token-aaaaaaaaaaaa"))
        let new = try #require(try open(hub, from: "127.0.0.2", token: "new-token-bbbbbbbbbbbb"))
        #expect(hub.endStreams(notPresenting: "new-token-bbbbbbbbbbbb") == 1)
        #expect(old.isClosed)
        #expect(!new.isClosed)
        #expect(hub.clientCount == 1)
        hub.closeAll()
    }
}
