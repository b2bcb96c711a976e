@testable import MicroHTTP
import CLinux
import Foundation
import Logging
import Primitives
import RunLoopTestSupport

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

/// A logger that records messages (and prints nothing).
final class RecordingLogHandler: LogHandler, @unchecked Sendable {
    private let lines = Locked<[String]>([])
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        lines.withLock { $0.append("\(event.level) \(event.message)") }
    }

    var messages: [String] { lines.withLock { $0 } }

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
    private struct Collected: Sendable {
        var output = Data()
        var errorOutput = Data()
        var finished = false
        var openPipes = 2
    }

    let process = Process()
    private let collected = Monitor(Collected())

    init(_ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        let collected = self.collected
        process.terminationHandler = { _ in collected.update { $0.finished = true } }
        // Pipes born close-on-exec (pipe2), so no other curl spawned at the same
        // moment inherits them (which would delay end-of-file); the child gets
        // its ends through dup2, which clears the flag.
        let (outRead, outWrite) = try Self.closeOnExecPipe()
        let (errRead, errWrite) = try Self.closeOnExecPipe()
        process.standardOutput = outWrite
        process.standardError = errWrite
        collect(outRead, isError: false)
        collect(errRead, isError: true)
        defer {
            // The parent's write ends: closed so end-of-file arrives when curl exits.
            try? outWrite.close()
            try? errWrite.close()
        }
        try process.run()
    }

    private static func closeOnExecPipe() throws -> (read: FileHandle, write: FileHandle) {
        var fds: [Int32] = [0, 0]
        guard clinux_pipe_cloexec(&fds) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        return (
            FileHandle(fileDescriptor: fds[0], closeOnDealloc: true),
            FileHandle(fileDescriptor: fds[1], closeOnDealloc: false)
        )
    }

    /// Reads `handle` to end-of-file on a thread of its own (blocking reads).
    private func collect(_ handle: FileHandle, isError: Bool) {
        let collected = self.collected
        Thread.detachNewThread {
            let fd = handle.fileDescriptor
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                collected.update {
                    if count <= 0 {
                        $0.openPipes -= 1
                    } else if isError {
                        $0.errorOutput.append(contentsOf: buffer[0..<count])
                    } else {
                        $0.output.append(contentsOf: buffer[0..<count])
                    }
                }
                if count <= 0 { break }
            }
            withExtendedLifetime(handle) {}
        }
    }

    /// Whether curl has exited.
    var isFinished: Bool { collected.value.finished }

    /// Output so far.
    var outputText: String { String(decoding: collected.value.output, as: UTF8.self) }

    /// Waits until stdout contains `text`.
    func waitForOutput(containing text: String, timeout: Double = 10) -> Bool {
        collected.wait(timeout: timeout) { String(decoding: $0.output, as: UTF8.self).contains(text) }
    }

    /// Waits for curl to exit and its pipes to close; kills it after `timeout`.
    func finish(timeout: Double = 20) -> (exitCode: Int32, output: Data, stderr: String)? {
        guard collected.wait(timeout: timeout, until: { $0.finished && $0.openPipes == 0 }) else {
            kill()
            return nil
        }
        let done = collected.value
        return (process.terminationStatus, done.output, String(decoding: done.errorOutput, as: UTF8.self))
    }

    /// Kills curl at once (a client that vanishes).
    func kill() {
        if process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL) }
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

/// `startServer` whose every answer is a new event stream, each handed to
/// the mailbox as it is made: the server, its base URL and the streams.
func startStreamServer(
    _ configure: (inout HTTPServerConfiguration) -> Void = { _ in }
) throws -> (HTTPServer, String, Mailbox<EventStream>) {
    let streams = Mailbox<EventStream>()
    let (server, base) = try startServer(configure) { _, respond in
        let stream = EventStream()
        streams.put(stream)
        respond(HTTPResponse(status: 200, stream: stream))
    }
    return (server, base, streams)
}

/// A 200 text/plain response.
func textResponse(_ text: String, status: Int = 200) -> HTTPResponse {
    HTTPResponse(status: status, headers: [("Content-Type", "text/plain")], body: Array(text.utf8))
}
