@testable import MicroHTTP
import Foundation
import Logging

@testable import RunLoopServer

#if canImport(Glibc)
    import Glibc
#endif

/// A handler built from a closure.
struct ClosureHandler: HTTPRequestHandler {
    let body: @Sendable (HTTPRequest, @escaping @Sendable (HTTPResponse) -> Void) -> Void

    func handle(_ request: HTTPRequest, respond: @escaping @Sendable (HTTPResponse) -> Void) {
        body(request, respond)
    }

    /// The layer's own refusals in the API's JSON shape, as runloopd renders them.
    func response(for refusal: HTTPRefusal) -> HTTPResponse { APIResponses.refusal(refusal) }
}

/// A value that one thread sets and others wait for, with a deadline (no sleeping).
final class Awaited<Value: Sendable>: @unchecked Sendable {
    private let condition = NSCondition()
    private var values: [Value] = []

    /// Adds a value and wakes waiters.
    func put(_ value: Value) {
        condition.lock()
        values.append(value)
        condition.broadcast()
        condition.unlock()
    }

    /// Every value put so far.
    var all: [Value] {
        condition.lock()
        defer { condition.unlock() }
        return values
    }

    /// Waits until at least `count` values were put; returns them, or `nil` after `timeout` seconds.
    func wait(count: Int = 1, timeout: Double = 10) -> [Value]? {
        let deadline = Date(timeIntervalSinceNow: timeout)
        condition.lock()
        defer { condition.unlock() }
        while values.count < count {
            if !condition.wait(until: deadline) { return values.count >= count ? values : nil }
        }
        return values
    }

    /// Waits for the first value.
    func first(timeout: Double = 10) -> Value? {
        wait(count: 1, timeout: timeout)?.first
    }
}

/// A logger that records messages (and prints nothing).
final class RecordingLogHandler: LogHandler, @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        lock.lock()
        lines.append("\(event.level) \(event.message)")
        lock.unlock()
    }

    var messages: [String] {
        lock.lock()
        defer { lock.unlock() }
        return lines
    }

    static func logger() -> (Logger, RecordingLogHandler) {
        let handler = RecordingLogHandler()
        return (Logger(label: "http-test") { _ in handler }, handler)
    }
}

/// What curl printed for one request.
struct CurlResult {
    var exitCode: Int32
    var status: Int
    var headers: [String: String]
    var body: Data
    var stderr: String

    var text: String { String(decoding: body, as: UTF8.self) }
}

/// A curl process whose output is collected as it arrives.
final class CurlProcess: @unchecked Sendable {
    let process = Process()
    private let condition = NSCondition()
    private var output = Data()
    private var errorOutput = Data()
    private var finished = false
    private var openPipes = 2

    /// Serialises pipe creation and spawning: pipes are made close-on-exec under
    /// it, so no other curl inherits them (which would delay end-of-file).
    private static let spawnLock = NSLock()

    init(_ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        process.terminationHandler = { [weak self] _ in self?.markFinished() }
        Self.spawnLock.lock()
        defer { Self.spawnLock.unlock() }
        let out = Pipe()
        let err = Pipe()
        for pipe in [out, err] {
            _ = fcntl(pipe.fileHandleForReading.fileDescriptor, F_SETFD, FD_CLOEXEC)
            _ = fcntl(pipe.fileHandleForWriting.fileDescriptor, F_SETFD, FD_CLOEXEC)
        }
        process.standardOutput = out
        process.standardError = err
        collect(out.fileHandleForReading, isError: false)
        collect(err.fileHandleForReading, isError: true)
        try process.run()
    }

    /// Reads `handle` to end-of-file on a thread of its own (blocking reads).
    private func collect(_ handle: FileHandle, isError: Bool) {
        let fd = handle.fileDescriptor
        let thread = Thread { [self] in
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                condition.lock()
                if count <= 0 {
                    openPipes -= 1
                } else if isError {
                    errorOutput.append(contentsOf: buffer[0..<count])
                } else {
                    output.append(contentsOf: buffer[0..<count])
                }
                condition.broadcast()
                condition.unlock()
                if count <= 0 { break }
            }
            withExtendedLifetime(handle) {}
        }
        thread.start()
    }

    private func markFinished() {
        condition.lock()
        finished = true
        condition.broadcast()
        condition.unlock()
    }

    /// Whether curl has exited.
    var isFinished: Bool {
        condition.lock()
        defer { condition.unlock() }
        return finished
    }

    /// Output so far.
    var outputText: String {
        condition.lock()
        defer { condition.unlock() }
        return String(decoding: output, as: UTF8.self)
    }

    /// Waits until stdout contains `text`.
    func waitForOutput(containing text: String, timeout: Double = 10) -> Bool {
        waitUntil(timeout: timeout) { String(decoding: self.output, as: UTF8.self).contains(text) }
    }

    /// Waits for curl to exit and its pipes to close; kills it after `timeout`.
    func finish(timeout: Double = 20) -> (exitCode: Int32, output: Data, stderr: String)? {
        let done = waitUntil(timeout: timeout) { self.finished && self.openPipes == 0 }
        if !done {
            kill()
            return nil
        }
        condition.lock()
        defer { condition.unlock() }
        return (process.terminationStatus, output, String(decoding: errorOutput, as: UTF8.self))
    }

    /// Kills curl at once (a client that vanishes).
    func kill() {
        if process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL) }
    }

    private func waitUntil(timeout: Double, _ predicate: () -> Bool) -> Bool {
        let deadline = Date(timeIntervalSinceNow: timeout)
        condition.lock()
        defer { condition.unlock() }
        while !predicate() {
            if !condition.wait(until: deadline) { return predicate() }
        }
        return true
    }
}

enum Curl {
    /// Runs `curl -sS -i` with `arguments` and parses the final response.
    static func run(_ arguments: [String], timeout: Double = 20) throws -> CurlResult {
        let process = try CurlProcess(["-sS", "-i", "--max-time", "15"] + arguments)
        guard let (exitCode, output, stderr) = process.finish(timeout: timeout) else {
            throw CurlError.timedOut(arguments)
        }
        return parse(output, exitCode: exitCode, stderr: stderr)
    }

    /// Splits `curl -i` output into the last status line, headers and body.
    static func parse(_ output: Data, exitCode: Int32, stderr: String) -> CurlResult {
        var rest = output[...]
        var status = 0
        var headers: [String: String] = [:]
        let separator = Data("\r\n\r\n".utf8)
        while rest.starts(with: Data("HTTP/".utf8)), let end = rest.range(of: separator) {
            let head = String(decoding: rest[rest.startIndex..<end.lowerBound], as: UTF8.self)
            let lines = head.components(separatedBy: "\r\n")
            let parts = lines.first?.split(separator: " ") ?? []
            status = parts.count > 1 ? Int(parts[1]) ?? 0 : 0
            headers = [:]
            for line in lines.dropFirst() {
                guard let colon = line.firstIndex(of: ":") else { continue }
                let name = line[..<colon].lowercased()
                headers[name] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
            rest = rest[end.upperBound...]
            if status >= 200 { break }
        }
        return CurlResult(exitCode: exitCode, status: status, headers: headers, body: Data(rest), stderr: stderr)
    }
}

enum CurlError: Error {
    case timedOut([String])
}

/// A raw TCP client that sends a request and then never reads (a slow client).
final class StalledClient {
    private let fd: Int32

    init?(port: UInt16, request: String) {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        var small: Int32 = 4096
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            Glibc.close(fd)
            return nil
        }
        let bytes = Array(request.utf8)
        guard send(fd, bytes, bytes.count, Int32(MSG_NOSIGNAL)) == bytes.count else {
            Glibc.close(fd)
            return nil
        }
    }

    deinit {
        Glibc.close(fd)
    }
}

/// Starts a server on 127.0.0.1, port 0, with `configure` applied to the configuration.
func startServer(
    _ configure: (inout HTTPServerConfiguration) -> Void = { _ in },
    handler: @escaping @Sendable (HTTPRequest, @escaping @Sendable (HTTPResponse) -> Void) -> Void
) throws -> (HTTPServer, String) {
    var configuration = HTTPServerConfiguration(host: "127.0.0.1", port: 0)
    configuration.connectionTimeout = 10
    configure(&configuration)
    let (logger, _) = RecordingLogHandler.logger()
    let server = HTTPServer(configuration: configuration, handler: ClosureHandler(body: handler), logger: logger)
    try server.start()
    let host = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
    return (server, "http://\(host):\(server.port)")
}

/// A 200 text/plain response.
func textResponse(_ text: String, status: Int = 200) -> HTTPResponse {
    HTTPResponse(status: status, headers: [("Content-Type", "text/plain")], body: Array(text.utf8))
}
