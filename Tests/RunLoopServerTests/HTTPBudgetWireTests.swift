import Dispatch
import Foundation
import RunLoopTestSupport
import Testing

@testable import MicroHTTP
@testable import RunLoopCore
@testable import RunLoopServer

/// Issue 37's HTTP budgets on the wire, against an in-process `HTTPServer`:
/// what libmicrohttpd hands over (a Host cut at a NUL, Content-Length with
/// Transfer-Encoding) is refused 400 and the connection closed; a kept-alive
/// connection's next request is due within the deadline counted from the
/// previous answer; a stream whose client hangs up detaches at once.
@Suite("HTTP budgets on the wire")
struct HTTPBudgetWireTests {
    private static func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    @Test("framing refusals: 400 with their code, the connection closed, nothing after the head run")
    func framingOnTheWire() throws {
        let handled = Mailbox<String>()
        let (server, _) = try startServer { request, respond in
            handled.put(request.path)
            respond(textResponse("ran \(request.path)"))
        }
        defer { server.stop() }
        let smuggled = "GET /smuggled HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        let cases: [(String, [UInt8])] = [
            (
                "ambiguous_framing",
                Array(
                    ("POST /a HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
                        + "2\r\n{}\r\n0\r\n\r\n" + smuggled).utf8)
            ),
            (
                "conflicting_content_length",
                Array(
                    ("POST /a HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\nContent-Length: 44\r\n\r\n{}"
                        + smuggled).utf8)
            ),
            ("bad_host", Array("GET /a HTTP/1.1\r\nHost: 127.0.0.1\u{0}.evil\r\n\r\n".utf8)),
            ("bad_host", Array("GET /a HTTP/1.1\r\nHost: 127.0.0.1\u{0}.evil\r\nAccept: */*\r\n\r\n".utf8)),
            ("bad_host", Array("GET /a HTTP/1.1\r\nHost: 127.0.0.1\u{7}\r\n\r\n".utf8)),
            ("bad_host", Array("GET /a HTTP/1.1\r\n\r\n".utf8)),
        ]
        for (code, payload) in cases {
            let connection = try TestHTTPConnection(port: server.port, timeout: 5)
            #expect(connection.write(payload))
            let answer = Self.text(try connection.readToEnd())
            #expect(answer.hasPrefix("HTTP/1.1 400 "), "\(code): \(answer)")
            #expect(answer.contains("\"code\":\"\(code)\""), "\(code): \(answer)")
            #expect(answer.components(separatedBy: "\r\nDate: ").count == 2, "a second answer: \(answer)")
        }
        // Sound requests still pass: a Host with blanks around it, an HTTP/1.0 request without one.
        for payload in [
            "GET /ok HTTP/1.1\r\nHost: 127.0.0.1 \r\nConnection: close\r\n\r\n", "GET /ok HTTP/1.0\r\n\r\n",
        ] {
            let connection = try TestHTTPConnection(port: server.port, timeout: 5)
            #expect(connection.write(Array(payload.utf8)))
            #expect(Self.text(try connection.readToEnd()).hasPrefix("HTTP/1.1 200 "))
        }
        #expect(handled.all == ["/ok", "/ok"], "a refused request reached the handler: \(handled.all)")
        #expect(server.connectionCounts.badFraming == cases.count)
    }

    @Test("a kept-alive connection's next request is due within the deadline counted from the last answer")
    func keepAliveDeadline() throws {
        let (server, _) = try startServer({ $0.requestDeadline = 0.5 }) { _, respond in respond(textResponse("ok")) }
        defer { server.stop() }
        let connection = try TestHTTPConnection(port: server.port, timeout: 5)
        #expect(connection.write(Array("GET /a HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)))
        #expect(try connection.readResponse().status == 200)
        let answered = Monotonic.now()
        // A byte of the next request line, then nothing more: closed at the deadline, not at the idle timeout (10 s).
        #expect(connection.write(Array("G".utf8)))
        #expect(try connection.readToEnd().isEmpty)
        let closedAfter = Monotonic.now() - answered
        #expect(closedAfter < 3, "closed \(closedAfter) s after the answer (deadline 0.5 s)")
        #expect(server.connectionCounts.expired >= 1)
    }

    @Test("a stream whose client hangs up detaches at once, with no write to find out")
    func streamHangUp() throws {
        let (server, _, streams) = try startStreamServer({ $0.sseHeartbeat = 3600 })
        defer { server.stop() }
        let connection = try TestHTTPConnection(port: server.port, timeout: 5)
        #expect(connection.write(Array("GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)))
        _ = try connection.read()
        let stream = try #require(streams.first(timeout: 5))
        #expect(waitUntil(timeout: 5) { server.liveStreamCount == 1 })
        connection.close()
        #expect(waitUntil(timeout: 2) { server.liveStreamCount == 0 }, "the stream kept its place")
        #expect(stream.closeReason == .clientDisconnected)
        #expect(server.connectionCounts.streamsHungUp == 1)
    }
}
