#if canImport(Glibc)
    import Glibc
#endif

/// A failure of the client itself (no answer), not an answer's status.
public struct HTTPClientError: Error, CustomStringConvertible {
    public let description: String
    /// True when no connection could be made (no server there, or a name that
    /// does not resolve): a caller that retries nothing gives up at once.
    public let unreachable: Bool
    public init(_ description: String, unreachable: Bool = false) {
        self.description = description
        self.unreachable = unreachable
    }
}

/// One HTTP answer.
public struct HTTPClientResponse: Sendable, CustomStringConvertible {
    public let status: Int
    public let headers: [(String, String)]
    public let body: [UInt8]

    public init(status: Int, headers: [(String, String)], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The first header named `name` (case-insensitive).
    public func header(_ name: String) -> String? {
        headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }

    public var text: String { String(decoding: body, as: UTF8.self) }

    public var description: String { "\(status) \(text)" }
}

/// A blocking HTTP/1.1 client on one TCP connection: the one HTTP client of
/// the tests, the benchmarks and `runloopd play`/`healthcheck` (`LabClient`).
/// It speaks to a runloopd only, so it needs no TLS, redirects or cookies.
///
/// - `request(...)` sends one request and reads its whole answer (status,
///   headers, body framed by Content-Length, chunks or the end of the stream);
///   with `keepAlive` the connection serves the next request, and it
///   reconnects by itself after an answer that ended the connection.
/// - Raw mode for protocol abuse: `write(_:)` any bytes, then `read()` what
///   comes, `readResponse()` one answer, or `readToEnd()`.
/// - Every receive and send gives up after `timeout` seconds (0: never).
///
/// Thread-safety: one thread uses a connection at a time, except that
/// `shutdownBoth()` may come from another thread to end a blocked read.
// @unchecked: one thread at a time uses it; shutdownBoth() from another is a syscall.
public final class HTTPClientConnection: @unchecked Sendable {
    /// The host connected to (a name or a numeric address, IPv4 or IPv6).
    public let host: String
    public let port: UInt16
    private let timeout: Double
    private let receiveBufferSize: Int?
    /// The socket (-1 once closed).
    public private(set) var fd: Int32 = -1
    /// Bytes received and not yet consumed by an answer.
    private var unread: [UInt8] = []
    private var peerClosed = false
    /// One receive buffer for the connection's life (not one per read).
    private var buffer = [UInt8](repeating: 0, count: 65_536)

    /// Connects to `host:port` (127.0.0.1 unless given). `receiveBufferSize`
    /// shrinks the socket's receive buffer (a client too slow to read fills up sooner).
    public init(host: String = "127.0.0.1", port: UInt16, timeout: Double = 20, receiveBufferSize: Int? = nil)
        throws(HTTPClientError)
    {
        self.host = host
        self.port = port
        self.timeout = timeout
        self.receiveBufferSize = receiveBufferSize
        try connect()
    }

    deinit { close() }

    private func connect() throws(HTTPClientError) {
        close()
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_NUMERICSERV
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &list) == 0, let first = list else {
            throw HTTPClientError("cannot resolve \(host)", unreachable: true)
        }
        defer { freeaddrinfo(list) }
        let fd = socket(first.pointee.ai_family, first.pointee.ai_socktype, first.pointee.ai_protocol)
        guard fd >= 0 else { throw HTTPClientError("socket: errno \(errno)") }
        if timeout > 0 {
            var tv = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - timeout.rounded(.down)) * 1_000_000))
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        if var size = receiveBufferSize.map(Int32.init) {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        guard Glibc.connect(fd, first.pointee.ai_addr, first.pointee.ai_addrlen) == 0 else {
            let code = errno
            Glibc.close(fd)
            throw HTTPClientError(
                "connect to \(host) port \(port): \(String(cString: strerror(code))) (errno \(code))", unreachable: true
            )
        }
        self.fd = fd
        unread = []
        peerClosed = false
    }

    /// Closes the socket (idempotent).
    public func close() {
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
    }

    /// Shuts both directions down: a read blocked on another thread returns.
    public func shutdownBoth() {
        if fd >= 0 { shutdown(fd, Int32(SHUT_RDWR)) }
    }

    /// Writes all of `bytes`; false if the peer closed (or a send timed out) first.
    @discardableResult
    public func write(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return false }
            offset += n
        }
        return true
    }

    /// Reads what is there (blocking up to the timeout); empty at the end of
    /// the stream or on a reset. Bytes left over from an answer come first.
    public func read() throws(HTTPClientError) -> [UInt8] {
        if !unread.isEmpty {
            defer { unread = [] }
            return unread
        }
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n >= 0 { return Array(buffer[0..<n]) }
            switch errno {
            case EINTR: continue
            case ECONNRESET: return []
            case EAGAIN: throw HTTPClientError("recv on port \(port): timed out after \(timeout) s")
            case let code: throw HTTPClientError("recv on port \(port): errno \(code)")
            }
        }
    }

    /// Everything until the peer closes.
    public func readToEnd() throws(HTTPClientError) -> [UInt8] {
        var data: [UInt8] = []
        while true {
            let chunk = try read()
            if chunk.isEmpty { return data }
            data += chunk
        }
    }

    /// Reads one answer. `expectsBody` is false for the answer to HEAD. An answer
    /// cut short by the end of the stream is returned as far as it came; no
    /// head at all throws.
    public func readResponse(expectsBody: Bool = true) throws(HTTPClientError) -> HTTPClientResponse {
        var decoder = HTTPResponseDecoder(expectsBody: expectsBody)
        decoder.feed(unread)
        unread = []
        while !decoder.isComplete {
            let chunk = try read()
            if chunk.isEmpty {
                peerClosed = true
                decoder.endOfStream()
                break
            }
            decoder.feed(chunk)
        }
        guard let status = decoder.status else {
            throw HTTPClientError("no HTTP answer on port \(port): \(String(decoding: decoder.unread, as: UTF8.self))")
        }
        unread = decoder.unread
        if decoder.header("connection")?.lowercased() == "close" { peerClosed = true }
        return HTTPClientResponse(status: status, headers: decoder.headers, body: decoder.body)
    }

    /// Sends one request and reads its whole answer. Without `keepAlive` the
    /// request says `Connection: close`; with it, the connection is reused (and
    /// reopened when the previous answer closed it).
    public func request(
        _ method: String, _ path: String, body: [UInt8]? = nil, contentType: String? = nil,
        headers: [(String, String)] = [], keepAlive: Bool = false
    ) throws(HTTPClientError) -> HTTPClientResponse {
        if peerClosed || fd < 0 { try connect() }
        let bytes = HTTPWire.request(
            method, path, body: body, contentType: contentType, headers: headers, keepAlive: keepAlive)
        // A failed write is not final: the server may have answered early (413) and closed.
        write(bytes)
        return try readResponse(expectsBody: method != "HEAD")
    }
}
