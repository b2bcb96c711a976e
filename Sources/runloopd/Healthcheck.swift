import ArgumentParser
import Foundation

/// `runloopd healthcheck`: GET /healthz on a running server and exit 0 on 200,
/// 1 otherwise. Needs no curl (the container's HEALTHCHECK uses it).
struct Healthcheck: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "healthcheck",
        abstract: "Exit 0 when a runloopd answers GET /healthz with 200, 1 otherwise.")

    @Option(help: "Address of the server.")
    var host: String = "127.0.0.1"

    @Option(help: "Port of the server.")
    var port: UInt16 = Env.integer("PORT").map(UInt16.init(clamping:)) ?? 8080

    @Option(help: "Seconds to wait for the answer.")
    var timeout: Double = 3

    func run() throws {
        switch Self.probe(host: host, port: port, timeout: timeout) {
        case .success(let status) where status == 200:
            print("healthy: GET /healthz answered 200")
        case .success(let status):
            print("unhealthy: GET /healthz answered \(status)")
            throw ExitCode(1)
        case .failure(let reason):
            print("unhealthy: \(reason.message)")
            throw ExitCode(1)
        }
    }

    struct ProbeError: Error {
        let message: String
    }

    /// Connects, sends `GET /healthz`, and returns the status code.
    static func probe(host: String, port: UInt16, timeout: Double) -> Result<Int, ProbeError> {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &list) == 0, let first = list else {
            return .failure(ProbeError(message: "cannot resolve \(host)"))
        }
        defer { freeaddrinfo(list) }
        let fd = socket(first.pointee.ai_family, first.pointee.ai_socktype, first.pointee.ai_protocol)
        guard fd >= 0 else { return .failure(ProbeError(message: "socket failed")) }
        defer { close(fd) }
        var wait = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - timeout.rounded(.down)) * 1e6))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
        guard connect(fd, first.pointee.ai_addr, first.pointee.ai_addrlen) == 0 else {
            return .failure(ProbeError(message: "cannot connect to \(host):\(port)"))
        }
        let request = Array("GET /healthz HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n".utf8)
        guard request.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, 0) }) == request.count else {
            return .failure(ProbeError(message: "cannot send the request"))
        }
        var buffer = [UInt8](repeating: 0, count: 512)
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard count > 12 else { return .failure(ProbeError(message: "no answer within \(timeout) s")) }
        let line = String(decoding: buffer[0..<count], as: UTF8.self)
        let parts = line.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), let status = Int(parts[1]) else {
            return .failure(ProbeError(message: "not an HTTP answer"))
        }
        return .success(status)
    }
}
