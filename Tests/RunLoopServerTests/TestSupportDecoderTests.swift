import RunLoopTestSupport
import Testing

/// The shared test client's response decoder, byte by byte (the e2e tests and
/// benchmarks trust it to frame every answer).
@Suite("RunLoopTestSupport decoder")
struct TestSupportDecoderTests {
    private func decode(_ text: String, expectsBody: Bool = true, step: Int) -> HTTPResponseDecoder {
        var decoder = HTTPResponseDecoder(expectsBody: expectsBody)
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            decoder.feed(bytes[offset..<min(offset + step, bytes.count)])
            offset += step
        }
        return decoder
    }

    @Test("Content-Length, chunks (split anywhere), interim 100, HEAD, and what follows an answer")
    func framing() {
        for step in [1, 3, 1000] {
            let sized = decode("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1", step: step)
            #expect(sized.isComplete && sized.status == 200 && sized.body == Array("hello".utf8))
            #expect(sized.unread == Array("HTTP/1.1".utf8))

            let chunked = decode(
                "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n"
                    + "3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nTrailer: t\r\n\r\nnext", step: step)
            #expect(chunked.isComplete && chunked.status == 201 && chunked.body == Array("abcde".utf8))
            #expect(chunked.unread == Array("next".utf8))

            let head = decode("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", expectsBody: false, step: step)
            #expect(head.isComplete && head.body.isEmpty && head.header("content-length") == "9")
        }
        var open = decode("HTTP/1.0 200 OK\r\n\r\nuntil the end", step: 4)
        #expect(!open.isComplete)
        open.endOfStream()
        #expect(open.isComplete && open.body == Array("until the end".utf8))
    }
}
