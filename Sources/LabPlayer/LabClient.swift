import Foundation
import RunLoopCore

/// A small blocking HTTP/1.1 client for the player: one connection per
/// request (`Connection: close`), JSON in and out. It speaks to a runloopd
/// only, so it needs no TLS, redirects or cookies.
public struct LabClient: Sendable {
    /// One answer.
    public struct Response: Sendable {
        /// The status code.
        public var status: Int
        /// The body parsed as JSON (`null` when empty or not JSON).
        public var json: Value
    }

    /// Why a request got no answer.
    public struct Failure: Error, CustomStringConvertible {
        /// What went wrong.
        public var description: String
        /// True when no connection could be made (no server there): nothing
        /// later will fare better, so the player gives up at once.
        public var unreachable = false
    }

    let host: String
    let port: UInt16
    let token: String?
    let timeout: Double

    /// A client for `http://host:port` (`url` is parsed by `init?(url:)`);
    /// `timeout` bounds each send and receive (also `runloopd healthcheck`'s probe).
    public init(host: String, port: UInt16, token: String? = nil, timeout: Double = 70) {
        self.host = host
        self.port = port
        self.token = token
        self.timeout = timeout
    }

    /// A client for an `http://host[:port]` URL.
    public init?(url: String, token: String? = nil) {
        guard url.hasPrefix("http://") else { return nil }
        var rest = url.dropFirst("http://".count)
        if let slash = rest.firstIndex(of: "/") { rest = rest[..<slash] }
        var host = String(rest)
        var port: UInt16 = 80
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return nil }
            let after = host[host.index(after: close)...]
            if after.hasPrefix(":") {
                guard let p = UInt16(after.dropFirst()) else { return nil }
                port = p
            }
            host = String(host[host.index(after: host.startIndex)..<close])
        } else if let colon = host.lastIndex(of: ":") {
            guard let p = UInt16(host[host.index(after: colon)...]) else { return nil }
            port = p
            host = String(host[..<colon])
        }
        guard !host.isEmpty else { return nil }
        self.init(host: host, port: port, token: token)
    }

    /// Sends one request and reads the whole answer.
    public func send(_ method: String, _ path: String, body: Value? = nil) throws(Failure) -> Response {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &list) == 0, let first = list else {
            throw Failure(description: "cannot resolve \(host)", unreachable: true)
        }
        defer { freeaddrinfo(list) }
        let fd = socket(first.pointee.ai_family, first.pointee.ai_socktype, first.pointee.ai_protocol)
        guard fd >= 0 else { throw Failure(description: "socket failed") }
        defer { close(fd) }
        var wait = timeval(
            tv_sec: Int(timeout.rounded(.down)), tv_usec: Int((timeout - timeout.rounded(.down)) * 1e6))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
        guard connect(fd, first.pointee.ai_addr, first.pointee.ai_addrlen) == 0 else {
            let reason = String(cString: strerror(errno))
            throw Failure(description: "cannot connect to \(host):\(port): \(reason)", unreachable: true)
        }
        let payload = body.map(JSON.serialize) ?? []
        // Connection: close, so the answer ends where the connection does.
        var head = "\(method) \(path) HTTP/1.1\r\nHost: \(host):\(port)\r\nConnection: close\r\n"
        head += "Accept: application/json\r\nUser-Agent: runloopd-play\r\n"
        if let token, !token.isEmpty { head += "Authorization: Bearer \(token)\r\n" }
        if body != nil { head += "Content-Type: application/json\r\nContent-Length: \(payload.count)\r\n" }
        let request = Array((head + "\r\n").utf8) + payload
        var sent = 0
        while sent < request.count {
            let n = request.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + sent, $0.count - sent, 0) }
            guard n > 0 else { throw Failure(description: "cannot send the request") }
            sent += n
        }
        var data: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n == 0 { break }
            guard n > 0 else {
                if errno == EINTR { continue }
                throw Failure(description: "no answer to \(method) \(path) within \(Int(timeout)) s")
            }
            data.append(contentsOf: buffer[0..<n])
        }
        return try Self.parse(data)
    }

    static func parse(_ data: [UInt8]) throws(Failure) -> Response {
        let separator: [UInt8] = [13, 10, 13, 10]
        guard let end = data.indices.first(where: { data[$0...].starts(with: separator) }) else {
            throw Failure(description: "a malformed answer (no header end)")
        }
        let head = String(decoding: data[..<end], as: UTF8.self)
        let lines = head.components(separatedBy: "\r\n")
        let statusParts = lines.first?.split(separator: " ") ?? []
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else {
            throw Failure(description: "a malformed status line")
        }
        var body = Array(data[(end + 4)...])
        let chunked = lines.dropFirst().contains {
            $0.lowercased().hasPrefix("transfer-encoding:") && $0.lowercased().contains("chunked")
        }
        if chunked { body = dechunk(body) }
        let json = body.isEmpty ? Value.null : ((try? JSON.parse(body)) ?? .null)
        return Response(status: status, json: json)
    }

    static func dechunk(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        var index = 0
        while index < bytes.count {
            guard let lineEnd = (index..<bytes.count - 1).first(where: { bytes[$0] == 13 && bytes[$0 + 1] == 10 })
            else { break }
            let sizeText = String(decoding: bytes[index..<lineEnd], as: UTF8.self).split(separator: ";").first ?? ""
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16), size > 0 else { break }
            let start = lineEnd + 2
            guard start + size <= bytes.count else { break }
            out.append(contentsOf: bytes[start..<start + size])
            index = start + size + 2
        }
        return out
    }
}
