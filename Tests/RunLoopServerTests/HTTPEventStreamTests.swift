@testable import MicroHTTP
import Dispatch
import Foundation
import RunLoopTestSupport
import Testing

@testable import RunLoopServer

extension HTTPServerTests {
    @Test("SSE frames: event, id, one data line per line")
    func eventFrames() {
        let frame = String(decoding: EventStream.frame(event: "tick", data: "a\nb\r\nc", id: 7), as: UTF8.self)
        #expect(frame == "event: tick\nid: 7\ndata: a\ndata: b\ndata: c\n\n")
        let plain = String(decoding: EventStream.frame(event: "", data: "x", id: nil), as: UTF8.self)
        #expect(plain == "data: x\n\n")
    }

    @Test("an unattached stream overflows, closes once and reports why")
    func unattachedOverflow() {
        let stream = EventStream(bufferBytes: 64)
        let reasons = Mailbox<EventStream.CloseReason>()
        stream.onClose { reasons.put($0) }
        #expect(stream.send(event: "e", data: "small", id: 1))
        #expect(!stream.send(event: "e", data: String(repeating: "x", count: 100), id: 2))
        #expect(stream.isClosed)
        #expect(stream.closeReason == .clientTooSlow)
        #expect(!stream.send(event: "e", data: "after", id: 3))
        stream.close()
        #expect(reasons.all == [.clientTooSlow])
        let late = Mailbox<EventStream.CloseReason>()
        stream.onClose { late.put($0) }
        #expect(late.all == [.clientTooSlow])
    }

    @Test("SSE: events arrive with the right headers, and close() ends the response")
    func eventsArrive() throws {
        let (server, base, streams) = try startStreamServer()
        defer { server.stop() }

        let curl = try CurlProcess(["-sS", "-N", "-i", "--max-time", "15", "\(base)/events"])
        let stream = try #require(streams.first())
        let closed = Mailbox<EventStream.CloseReason>()
        stream.onClose { closed.put($0) }
        // The header goes out before any event (EventSource `onopen` fires at once).
        #expect(curl.waitForOutput(containing: ": open\n\n"))
        #expect(stream.send(event: "tick", data: "hello", id: 1))
        #expect(curl.waitForOutput(containing: "event: tick\nid: 1\ndata: hello\n\n"))
        let output = curl.outputText.lowercased()
        #expect(output.contains("content-type: text/event-stream"))
        #expect(output.contains("cache-control: no-store"))

        // The reader is suspended with nothing to send; a later send resumes it.
        #expect(stream.send(event: "tock", data: "line 1\nline 2", id: 2))
        #expect(curl.waitForOutput(containing: "event: tock\nid: 2\ndata: line 1\ndata: line 2\n\n"))

        stream.close()
        let finished = try #require(curl.finish())
        #expect(finished.exitCode == 0)
        #expect(closed.first() == .closed)
    }

    @Test("SSE: a client that vanishes is noticed through heartbeats and onClose fires once")
    func vanishedClient() throws {
        let (server, base, streams) = try startStreamServer({ $0.sseHeartbeat = 0.05 })
        defer { server.stop() }

        let curl = try CurlProcess(["-sS", "-N", "--max-time", "15", "\(base)/events"])
        let stream = try #require(streams.first())
        let closed = Mailbox<EventStream.CloseReason>()
        stream.onClose { closed.put($0) }
        #expect(curl.waitForOutput(containing: ": ping\n\n"))
        curl.kill()
        _ = curl.finish()
        #expect(closed.first() == .clientDisconnected)
        #expect(stream.isClosed)
        #expect(closed.all.count == 1)
        server.stop()
        #expect(server.liveStreamCount == 0)
        #expect(server.liveRequestCount == 0)
    }

    @Test("SSE: a client too slow to read closes the stream without blocking the producer or the server")
    func slowClient() throws {
        let streams = Mailbox<EventStream>()
        let (server, base) = try startServer({ $0.sseBufferBytes = 8192 }) { request, respond in
            guard request.path == "/events" else { return respond(textResponse("still here")) }
            let stream = EventStream()
            streams.put(stream)
            respond(HTTPResponse(status: 200, stream: stream))
        }
        defer { server.stop() }

        // A client that sends its request and never reads, with a small receive buffer.
        let client = try TestHTTPConnection(port: server.port, receiveBufferSize: 4096)
        #expect(client.write(Array("GET /events HTTP/1.1\r\nHost: localhost\r\n\r\n".utf8)))
        let stream = try #require(streams.first())
        let closed = Mailbox<EventStream.CloseReason>()
        stream.onClose { closed.put($0) }
        let payload = String(repeating: "z", count: 1000)
        var sent = 0
        let started = Date()
        // Loopback socket buffers hold a few MiB at most; 256 MiB is far beyond them.
        while sent < 256 * 1024 && stream.send(event: "bulk", data: payload, id: UInt64(sent)) {
            sent += 1
            if sent % 4 == 0 {
                // Let the libmicrohttpd thread drain into the socket for a moment (a
                // deadline wait on the close signal, not a sleep).
                _ = closed.first(timeout: 0.001)
            }
        }
        #expect(stream.isClosed)
        #expect(closed.first() == .clientTooSlow)
        #expect(closed.all.count == 1)
        #expect(Date().timeIntervalSince(started) < 30)
        // The stalled connection blocks nobody: the server still answers.
        let other = try Curl.run(["\(base)/other"])
        #expect(other.status == 200)
        #expect(other.text == "still here")
        withExtendedLifetime(client) {}
    }

    @Test("stop() ends open event streams and returns promptly")
    func stopEndsStreams() throws {
        // A grace far longer than any stop takes: a stop that waited for the
        // open stream would wait it out (see `stopAnswersSuspended`).
        let (server, base, streams) = try startStreamServer { $0.shutdownGracePeriod = HTTPServerTests.longGrace }
        let curl = try CurlProcess(["-sS", "-N", "--max-time", "\(3 * HTTPServerTests.longGrace)", "\(base)/events"])
        let stream = try #require(streams.first())
        let closed = Mailbox<EventStream.CloseReason>()
        stream.onClose { closed.put($0) }
        #expect(stream.send(event: "hello", data: "1", id: nil))
        #expect(curl.waitForOutput(containing: "data: 1\n\n"))
        let started = Date()
        server.stop()
        let elapsed = Date().timeIntervalSince(started)
        #expect(elapsed < HTTPServerTests.longGrace / 2, "the stop waited \(elapsed) s")
        #expect(closed.first() == .serverStopping)
        #expect(curl.finish() != nil)
        #expect(server.liveStreamCount == 0)
        #expect(server.liveRequestCount == 0)
    }
}
