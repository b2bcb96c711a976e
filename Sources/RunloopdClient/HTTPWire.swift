/// HTTP/1.1 framing for `HTTPClientConnection`: requests as bytes, response heads,
/// and a decoder that takes a response apart as its bytes arrive.
public enum HTTPWire {
    /// A request's bytes: `Host: 127.0.0.1` (unless `headers` has a Host),
    /// `Connection: close` unless `keepAlive`,
    /// `Content-Type` when given, `Content-Length` when there is a body, then
    /// `headers` as given (nothing is checked: abuse tests send what they like).
    public static func request(
        _ method: String, _ path: String, body: [UInt8]?, contentType: String?, headers: [(String, String)],
        keepAlive: Bool = false
    ) -> [UInt8] {
        // A Host among `headers` replaces the default one (rebinding tests send foreign ones).
        let customHost = headers.contains { $0.0.lowercased() == "host" }
        var head = "\(method) \(path) HTTP/1.1\r\n" + (customHost ? "" : "Host: 127.0.0.1\r\n")
        if !keepAlive { head += "Connection: close\r\n" }
        if let contentType { head += "Content-Type: \(contentType)\r\n" }
        if let body { head += "Content-Length: \(body.count)\r\n" }
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        head += "\r\n"
        return Array(head.utf8) + (body ?? [])
    }

    /// Splits a raw response's head; nil until the header block is complete.
    /// `bodyStart` is the offset of the first byte after the blank line.
    public static func parseHead(_ data: [UInt8]) -> (status: Int, headers: [(String, String)], bodyStart: Int)? {
        guard let end = find([13, 10, 13, 10], in: data) else { return nil }
        let lines = String(decoding: data[0..<end], as: UTF8.self).split(
            separator: "\r\n", omittingEmptySubsequences: false)
        let statusParts = lines.first?.split(separator: " ") ?? []
        let status = statusParts.count > 1 ? Int(statusParts[1]) ?? 0 : 0
        var headers: [(String, String)] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers.append((String(line[..<colon]), trimmed(line[line.index(after: colon)...])))
        }
        return (status, headers, end + 4)
    }

    /// The offset of the first `needle` in `data` at or after `start`.
    public static func find(_ needle: [UInt8], in data: [UInt8], from start: Int = 0) -> Int? {
        guard !needle.isEmpty, data.count >= needle.count, start <= data.count - needle.count else { return nil }
        var i = start
        while i + needle.count <= data.count {
            if data[i] == needle[0] && data[i..<(i + needle.count)].elementsEqual(needle) { return i }
            i += 1
        }
        return nil
    }

    /// `text` without leading and trailing spaces and tabs.
    static func trimmed(_ text: Substring) -> String {
        String(text.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
    }
}

/// One response taken apart as its bytes arrive: interim (1xx) heads skipped,
/// then the head, then a body framed by `Content-Length`, by chunks (decoded),
/// or by the end of the stream.
public struct HTTPResponseDecoder: Sendable {
    private enum Framing: Sendable {
        case length(remaining: Int)
        case chunkSize, chunkData(remaining: Int), chunkEnd, trailers
        case untilClose
        case done
    }

    /// The final status, once its head arrived.
    public private(set) var status: Int?
    public private(set) var headers: [(String, String)] = []
    /// The (de-chunked) body so far.
    public var body: [UInt8] = []
    /// Bytes not decoded yet; once complete, those of what followed the response.
    public private(set) var unread: [UInt8] = []
    private let expectsBody: Bool
    private var framing = Framing.untilClose

    /// `expectsBody` is false for the answer to a HEAD request.
    public init(expectsBody: Bool = true) {
        self.expectsBody = expectsBody
    }

    /// Whether the whole response (head and body) arrived.
    public var isComplete: Bool {
        if case .done = framing { return true }
        return false
    }

    /// The first header named `name` (case-insensitive).
    public func header(_ name: String) -> String? {
        headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }

    /// Decodes as much of `bytes` (appended to what is unread) as it can.
    public mutating func feed(_ bytes: some Sequence<UInt8>) {
        unread.append(contentsOf: bytes)
        while step() {}
    }

    /// The stream ended: a body framed by the end of the stream is complete.
    public mutating func endOfStream() {
        if status != nil, case .untilClose = framing { framing = .done }
    }

    /// One decoding step; false when it needs more bytes or is done.
    private mutating func step() -> Bool {
        guard status != nil else { return readHead() }
        switch framing {
        case .done:
            return false
        case .untilClose:
            body += unread
            unread = []
            return false
        case .length(let remaining):
            let left = moveToBody(remaining)
            framing = left == 0 ? .done : .length(remaining: left)
            return false
        case .chunkSize:
            guard let lineEnd = HTTPWire.find([13, 10], in: unread) else { return false }
            let line = String(decoding: unread[0..<lineEnd], as: UTF8.self)
            unread.removeFirst(lineEnd + 2)
            guard let size = Int(HTTPWire.trimmed(line.split(separator: ";").first ?? ""), radix: 16) else {
                framing = .untilClose  // not chunked after all: keep the rest as it is
                return true
            }
            framing = size == 0 ? .trailers : .chunkData(remaining: size)
            return true
        case .chunkData(let remaining):
            let left = moveToBody(remaining)
            framing = left == 0 ? .chunkEnd : .chunkData(remaining: left)
            return left == 0
        case .chunkEnd:
            guard unread.count >= 2 else { return false }
            unread.removeFirst(2)
            framing = .chunkSize
            return true
        case .trailers:
            guard let lineEnd = HTTPWire.find([13, 10], in: unread) else { return false }
            unread.removeFirst(lineEnd + 2)
            if lineEnd == 0 { framing = .done }
            return lineEnd != 0
        }
    }

    /// Moves up to `count` unread bytes to the body; returns how many are still to come.
    private mutating func moveToBody(_ count: Int) -> Int {
        let take = min(count, unread.count)
        body += unread[0..<take]
        unread.removeFirst(take)
        return count - take
    }

    private mutating func readHead() -> Bool {
        guard let head = HTTPWire.parseHead(unread) else { return false }
        unread.removeFirst(head.bodyStart)
        if (100..<200).contains(head.status) && head.status != 101 { return true }  // interim: the final one follows
        status = head.status
        headers = head.headers
        if !expectsBody || head.status == 204 || head.status == 304 {
            framing = .done
        } else if header("transfer-encoding")?.lowercased().contains("chunked") == true {
            framing = .chunkSize
        } else if let length = header("content-length").flatMap({ Int($0) }) {
            framing = length == 0 ? .done : .length(remaining: length)
        } else {
            framing = .untilClose
        }
        return true
    }
}
