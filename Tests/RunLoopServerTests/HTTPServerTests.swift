@testable import MicroHTTP
import Dispatch
import Foundation
import Testing

@testable import RunLoopServer
import RunLoopTestSupport

/// What the echo handler reports about a request.
private struct Echo: Codable {
    var id: UInt64
    var method: String
    var path: String
    var query: [String: String]
    var headers: [String: String]
    var bodyCount: Int
    var remoteAddress: String?
}

private func echoResponse(_ request: HTTPRequest) -> HTTPResponse {
    let echo = Echo(
        id: request.id, method: request.method, path: request.path, query: request.query,
        headers: Dictionary(request.headers.fields.map { ($0.name.lowercased(), $0.value) }) { first, _ in first },
        bodyCount: request.body.count, remoteAddress: request.remoteAddress)
    let body = (try? JSONEncoder().encode(echo)) ?? Data()
    return HTTPResponse(status: 200, headers: [("Content-Type", "application/json")], body: [UInt8](body))
}

private let shuttingDownBody =
    #"{"error":{"code":"shutting_down","message":"the server is shutting down","field":null}}"#

@Suite("HTTPServer", .timeLimit(.minutes(2)))
struct HTTPServerTests {
    /// A shutdown grace no stop needs: a test that gives the server this one
    /// and sees the stop end in less than half of it knows the stop did not
    /// wait for what it should not, however busy the machine.
    static let longGrace = 60.0

    @Test("answers inside handle without suspending; parses query and headers")
    func syncAnswer() throws {
        let (server, base) = try startServer { request, respond in respond(echoResponse(request)) }
        defer { server.stop() }

        let result = try Curl.run(["-H", "X-Test-Header: Value 1", "\(base)/hello/w%2Fx?a=1&b=x%20y&b=2&c=p+q&flag"])
        #expect(result.status == 200)
        #expect(result.headers["content-type"] == "application/json")
        let echo = try JSONDecoder().decode(Echo.self, from: result.body)
        #expect(echo.method == "GET")
        #expect(echo.path == "/hello/w%2Fx")
        #expect(echo.query == ["a": "1", "b": "x y", "c": "p q", "flag": ""])
        #expect(echo.headers["x-test-header"] == "Value 1")
        #expect(echo.headers["host"] != nil)
        #expect(echo.remoteAddress == "127.0.0.1")
        #expect(echo.id > 0)
    }

    @Test("request ids increase")
    func increasingIDs() throws {
        let (server, base) = try startServer { request, respond in respond(echoResponse(request)) }
        defer { server.stop() }
        let first = try JSONDecoder().decode(Echo.self, from: Curl.run(["\(base)/a"]).body)
        let second = try JSONDecoder().decode(Echo.self, from: Curl.run(["\(base)/b"]).body)
        #expect(second.id > first.id)
    }

    @Test("answers later from another thread: the connection is suspended, then resumed")
    func asyncAnswer() throws {
        let pending = Mailbox<@Sendable (HTTPResponse) -> Void>()
        let (server, base) = try startServer { _, respond in pending.put(respond) }
        defer { server.stop() }

        let curl = try CurlProcess(["-sS", "-i", "--max-time", "15", "\(base)/later"])
        let respond = try #require(pending.first())
        #expect(!curl.isFinished)
        DispatchQueue.global().async { respond(textResponse("late answer", status: 202)) }
        let (exitCode, output, _) = try #require(curl.finish())
        let result = Curl.parse(output, exitCode: exitCode, stderr: "")
        #expect(result.status == 202)
        #expect(result.text == "late answer")
        // A second answer is ignored, not a crash.
        respond(textResponse("again"))
    }

    @Test("100 concurrent requests are all answered, and every request context is released")
    func concurrentRequests() throws {
        let handled = Mailbox<UInt64>()
        let (server, base) = try startServer({ $0.perIPConnectionLimit = 256 }) { request, respond in
            handled.put(request.id)
            if request.id % 2 == 0 {
                respond(textResponse("sync \(request.path)"))
            } else {
                DispatchQueue.global().async { respond(textResponse("async \(request.path)")) }
            }
        }
        let urls = (0..<100).flatMap { ["-o", "/dev/null", "\(base)/r/\($0)"] }
        let curl = try CurlProcess(
            ["-sS", "-Z", "--parallel-max", "100", "--max-time", "15", "-w", "%{http_code}\n"] + urls)
        let (exitCode, output, stderr) = try #require(curl.finish(timeout: 60))
        #expect(exitCode == 0, "\(stderr)")
        let codes = String(decoding: output, as: UTF8.self).split(separator: "\n")
        #expect(codes.count == 100)
        #expect(codes.allSatisfy { $0 == "200" }, "\(codes) \(stderr)")
        #expect(Set(handled.all).count == 100)
        server.stop()
        #expect(server.liveRequestCount == 0)
    }

    @Test("a body within the limit reaches the handler")
    func bodyWithinLimit() throws {
        let (server, base) = try startServer({ $0.maxBodyBytes = 1024 }) { request, respond in
            respond(echoResponse(request))
        }
        defer { server.stop() }
        let body = String(repeating: "a", count: 1000)
        let result = try Curl.run(["--data-binary", body, "\(base)/upload"])
        #expect(result.status == 200)
        let echo = try JSONDecoder().decode(Echo.self, from: result.body)
        #expect(echo.method == "POST")
        #expect(echo.bodyCount == 1000)

        let chunked = try Curl.run(["-H", "Transfer-Encoding: chunked", "--data-binary", body, "\(base)/upload"])
        #expect(chunked.status == 200)
        #expect(try JSONDecoder().decode(Echo.self, from: chunked.body).bodyCount == 1000)
    }

    @Test("Content-Length over the limit is answered 413 without calling the handler")
    func contentLengthTooLarge() throws {
        let (server, base, calls) = try Self.oneKiBServer()
        defer { server.stop() }
        let body = String(repeating: "b", count: 2048)
        let result = try Curl.run(["--data-binary", body, "\(base)/upload"])
        #expect(result.status == 413)
        #expect(result.headers["content-type"] == "application/json")
        #expect(
            result.text
                == #"{"error":{"code":"payload_too_large","message":"request body exceeds 1024 bytes","field":null}}"#)

        let big = String(repeating: "c", count: 2_000_000)
        try withTemporaryPath("http-big") { file in
            try Data(big.utf8).write(to: file)
            let large = try Curl.run(["--data-binary", "@\(file.path)", "\(base)/upload"])
            #expect(large.status == 413)
        }
        #expect(calls.all.isEmpty)
    }

    /// A server that takes bodies of at most 1 KiB, whose handler only notes
    /// the paths it is called for: the server, its base URL and the paths.
    private static func oneKiBServer() throws -> (HTTPServer, String, Mailbox<String>) {
        let calls = Mailbox<String>()
        let (server, base) = try startServer({ $0.maxBodyBytes = 1024 }) { request, respond in
            calls.put(request.path)
            respond(textResponse("should not happen"))
        }
        return (server, base, calls)
    }

    @Test("a chunked body over the limit is answered 413")
    func chunkedTooLarge() throws {
        let (server, base, calls) = try Self.oneKiBServer()
        defer { server.stop() }
        let body = String(repeating: "d", count: 4096)
        let result = try Curl.run(["-H", "Transfer-Encoding: chunked", "--data-binary", body, "\(base)/upload"])
        #expect(result.status == 413)
        #expect(result.headers["content-type"] == "application/json")
        #expect(result.text.contains(#""code":"payload_too_large""#))
        #expect(calls.all.isEmpty)
    }

    @Test("stop() answers a suspended request with 503 and returns promptly; safe twice")
    func stopAnswersSuspended() throws {
        let pending = Mailbox<@Sendable (HTTPResponse) -> Void>()
        // A grace far longer than any stop takes: a stop that waited for the
        // suspended handler would wait it out (judged by the server's own
        // bound, not by how fast this machine is).
        let (server, base) = try startServer {
            $0.shutdownGracePeriod = Self.longGrace
        } handler: { _, respond in
            pending.put(respond)
        }

        let curl = try CurlProcess(["-sS", "-i", "--max-time", "\(3 * Self.longGrace)", "\(base)/never"])
        let respond = try #require(pending.first())
        let started = Date()
        server.stop()
        let elapsed = Date().timeIntervalSince(started)
        #expect(elapsed < Self.longGrace / 2, "the stop waited \(elapsed) s")
        let (exitCode, output, _) = try #require(curl.finish())
        let result = Curl.parse(output, exitCode: exitCode, stderr: "")
        #expect(result.status == 503)
        #expect(result.headers["content-type"] == "application/json")
        #expect(result.text == shuttingDownBody)
        #expect(!server.isRunning)
        #expect(server.liveRequestCount == 0)
        server.stop()
        respond(textResponse("too late"))
    }

    @Test("a handler that keeps `respond` does not keep the stopped server alive")
    func serverReleased() throws {
        let kept = Mailbox<@Sendable (HTTPResponse) -> Void>()
        weak var weakServer: HTTPServer?
        do {
            let (server, base) = try startServer { _, respond in kept.put(respond) }
            weakServer = server
            let curl = try CurlProcess(["-sS", "--max-time", "15", "\(base)/kept"])
            _ = try #require(kept.first())
            server.stop()
            #expect(curl.finish(timeout: 20 * ServerProcess.slowdown) != nil)
            #expect(server.liveRequestCount == 0)
        }
        #expect(weakServer == nil)
        // Answering after the server is gone is harmless.
        kept.first()?(textResponse("late"))
    }

    @Test("start fails with a thrown error when the port is taken")
    func portInUse() throws {
        let (first, _) = try startServer { _, respond in respond(textResponse("ok")) }
        defer { first.stop() }
        let (logger, records) = RecordingLogHandler.logger()
        let second = HTTPServer(
            configuration: HTTPServerConfiguration(host: "127.0.0.1", port: first.port),
            handler: ClosureHandler { _, respond in respond(textResponse("no")) }, logger: logger)
        #expect {
            try second.start()
        } throws: { error in
            guard let error = error as? HTTPServerError else { return false }
            return error.kind == .startFailed && error.message.contains("\(first.port)")
        }
        #expect(!second.isRunning)
        // libmicrohttpd's own explanation went to the logger, not to stderr.
        #expect(records.messages.contains { $0.contains("libmicrohttpd") })
        second.stop()
    }

    @Test("invalid configuration and unresolvable hosts are thrown errors")
    func invalidConfiguration() {
        let handler = ClosureHandler { _, respond in respond(textResponse("no")) }
        let (logger, _) = RecordingLogHandler.logger()
        let badThreads = HTTPServer(
            configuration: HTTPServerConfiguration(port: 0, httpThreads: 0), handler: handler, logger: logger)
        #expect(throws: HTTPServerError.self) { try badThreads.start() }
        let badHost = HTTPServer(
            configuration: HTTPServerConfiguration(host: "no such host.invalid", port: 0), handler: handler,
            logger: logger)
        #expect(throws: HTTPServerError.self) { try badHost.start() }
    }

    @Test("listens on IPv6 loopback")
    func ipv6() throws {
        let (server, base) = try startServer({ $0.host = "::1" }) { request, respond in
            respond(echoResponse(request))
        }
        defer { server.stop() }
        let result = try Curl.run(["-g", "\(base)/six"])
        #expect(result.status == 200)
        #expect(try JSONDecoder().decode(Echo.self, from: result.body).remoteAddress == "::1")
    }

    @Test("a thread pool serves requests")
    func threadPool() throws {
        let (server, base) = try startServer({ $0.httpThreads = 2 }) { request, respond in
            DispatchQueue.global().async { respond(textResponse("pool \(request.path)")) }
        }
        defer { server.stop() }
        for index in 0..<4 {
            let result = try Curl.run(["\(base)/p\(index)"])
            #expect(result.status == 200)
            #expect(result.text == "pool /p\(index)")
        }
    }

    @Test("error bodies have the API's exact shape")
    func errorShape() {
        let response = APIResponses.refusal(
            HTTPRefusal(status: 400, code: .badValue, message: "say \"hi\"\n", field: "seconds"))
        #expect(response.status == 400)
        #expect(response.headers.first { $0.0 == "Content-Type" }?.1 == "application/json")
        #expect(
            String(decoding: response.body, as: UTF8.self)
                == #"{"error":{"code":"bad_value","message":"say \"hi\"\n","field":"seconds"}}"#)
    }
}
