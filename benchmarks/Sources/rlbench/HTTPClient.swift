import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A minimal HTTP/1.1 keep-alive client on one TCP connection to 127.0.0.1,
/// for sequential latency measurements (one request in flight).
final class HTTPClient {
    private var fd: Int32 = -1
    private let port: UInt16
    private var buffer = [UInt8](repeating: 0, count: 1 << 20)
    private var pending: [UInt8] = []

    init(port: UInt16) throws {
        self.port = port
        try connect()
    }

    deinit { if fd >= 0 { close(fd) } }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    private func connect() throws {
        if fd >= 0 { close(fd) }
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket failed") }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard status == 0 else { throw Failure(description: "connect to port \(port) failed: errno \(errno)") }
        pending.removeAll()
    }

    /// Sends one request and reads the whole answer; returns status and body.
    func request(_ method: String, _ path: String, body: String? = nil) throws -> (status: Int, body: String) {
        var text = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        if let body {
            text += "Content-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
        } else {
            text += "\r\n"
        }
        let bytes = Array(text.utf8)
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw Failure(description: "send failed: errno \(errno)") }
            sent += n
        }
        // Read the head.
        var headEnd: Int?
        while headEnd == nil {
            headEnd = find(pending, [13, 10, 13, 10])
            if headEnd == nil { try fill() }
        }
        let head = String(decoding: pending[..<headEnd!], as: UTF8.self)
        let lines = head.split(separator: "\r\n")
        let status = lines.first.flatMap { Int($0.split(separator: " ").dropFirst().first ?? "") } ?? 0
        var length = 0
        var close = false
        for line in lines.dropFirst() {
            let parts = line.split(separator: ":", maxSplits: 1)
            guard parts.count == 2 else { continue }
            let name = parts[0].lowercased()
            let value = parts[1].trimmingCharacters(in: .whitespaces)
            if name == "content-length" { length = Int(value) ?? 0 }
            if name == "connection" && value.lowercased() == "close" { close = true }
        }
        let start = headEnd! + 4
        while pending.count < start + length { try fill() }
        let bodyText = String(decoding: pending[start..<(start + length)], as: UTF8.self)
        pending.removeFirst(start + length)
        if close { try connect() }
        return (status, bodyText)
    }

    private func fill() throws {
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { throw Failure(description: "connection closed (recv \(n), errno \(errno))") }
        pending.append(contentsOf: buffer[0..<n])
    }

    private func find(_ haystack: [UInt8], _ needle: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for i in 0...(haystack.count - needle.count) where haystack[i] == needle[0] {
            if haystack[i + 1] == needle[1] && haystack[i + 2] == needle[2] && haystack[i + 3] == needle[3] {
                return i
            }
        }
        return nil
    }
}

/// A server process started for a benchmark (runloopd or the bare MHD hello).
final class ServerProcess {
    let process = Process()
    let port: UInt16

    init(executable: String, arguments: [String], port: UInt16) throws {
        self.port = port
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        let up = waitUntil(timeout: 15) { (try? HTTPClient(port: port)) != nil }
        guard up else {
            process.terminate()
            throw HTTPClient.Failure(description: "\(executable) did not listen on \(port)")
        }
    }

    func stop() {
        guard process.isRunning else { return }
        process.interrupt()
        let ended = waitUntil(timeout: 8) { !process.isRunning }
        if !ended { process.terminate() }
        process.waitUntilExit()
    }
}

/// A free TCP port on 127.0.0.1 (bind to 0, read it, close).
func freePort() -> UInt16 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Int32 in
            _ = bind(fd, pointer, length)
            return getsockname(fd, pointer, &length)
        }
    }
    return UInt16(bigEndian: address.sin_port)
}
