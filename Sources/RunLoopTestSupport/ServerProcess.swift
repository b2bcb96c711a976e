import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A server process started for a test or a benchmark: the real `runloopd` on
/// a free loopback port (`runloopd(binary:arguments:)`), or any other server on
/// a known port (`listening(executable:arguments:port:)`). Its stderr is
/// collected in `output` as it arrives, beside its exit status once it exited.
/// Every wait has a deadline.
// @unchecked: Foundation.Process is not marked Sendable; it is started once and only read after.
public final class ServerProcess: @unchecked Sendable {
    public struct Output: Sendable {
        /// Everything the process wrote to stderr so far.
        public var log = ""
        public var exitStatus: Int32?
        /// Whether its stderr reached its end (every line written is in `log`).
        public var logEnded = false

        /// Output seen so far (none by default).
        public init(log: String = "", exitStatus: Int32? = nil) {
            self.log = log
            self.exitStatus = exitStatus
        }
    }

    public let process: Process
    public let port: UInt16
    public let output: Monitor<Output>
    /// A temporary folder (the port file) removed by `stop()`.
    private let directory: URL?

    public var pid: Int32 { process.processIdentifier }

    /// How long a start may take before it counts as a hang: 300 s, or
    /// `E2E_START_TIMEOUT` seconds. A server is ready when it says so (its
    /// port file, its log line), and a start ends early when the process
    /// exits, so this bound is not a judgement of speed: a machine at load
    /// 15–38 took more than 20 s, the bound this once was (issue 41), and
    /// a test waits as long as the server is alive and has not yet said it
    /// is ready. Also the bound of an exit where a test checks only that it
    /// is clean, not how fast.
    public static let startTimeout: Double =
        ProcessInfo.processInfo.environment["E2E_START_TIMEOUT"].flatMap(Double.init) ?? 300

    /// How much slower than a plain build the servers under test run:
    /// `E2E_SLOWDOWN`, else 1 (the ThreadSanitizer run sets 4.5). A test that
    /// bounds a stop in seconds scales its bound by it; the bound's meaning stays.
    public static let slowdown = max(1, ProcessInfo.processInfo.environment["E2E_SLOWDOWN"].flatMap(Double.init) ?? 1)
    public var log: String { output.value.log }

    private init(process: Process, port: UInt16, output: Monitor<Output>, directory: URL?) {
        self.process = process
        self.port = port
        self.output = output
        self.directory = directory
    }

    /// Starts `binary --port 0 --port-file <temporary> arguments` (with no
    /// `RUNLOOPD_*` variable inherited, `XDG_STATE_HOME` set to its own
    /// temporary folder, `environment` added) and waits, while it runs, until it
    /// writes the port it listens on (which it does once it accepts
    /// connections); `timeout` seconds only catch a start that hangs.
    public static func runloopd(
        binary: URL, arguments: [String] = [], environment extra: [String: String] = [:],
        timeout: Double = startTimeout, workingDirectory: URL? = nil
    ) throws -> ServerProcess {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "runloopd-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let portFile = directory.appendingPathComponent("port")
        // Its history store (SQLite by default) lives in its own folder, removed with it;
        // SIGTERM stops it at once (no drain) unless a test asks for one.
        let environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("RUNLOOPD_") }
            .merging(["XDG_STATE_HOME": directory.path, "RUNLOOPD_DRAIN_DELAY": "0"]) { _, own in own }
            .merging(extra) { _, given in given }
        let (process, output) = try launch(
            binary, ["--port", "0", "--port-file", portFile.path] + arguments, environment: environment,
            workingDirectory: workingDirectory)
        func writtenPort() -> UInt16? {
            (try? String(contentsOf: portFile, encoding: .utf8)).flatMap {
                UInt16($0.trimmingCharacters(in: .whitespacesAndNewlines))
            }
        }
        // The file appears by a rename, whole; re-checked on every stderr line and every 20 ms.
        output.wait(timeout: timeout, recheckEvery: 0.02) { writtenPort() != nil || output.value.exitStatus != nil }
        guard output.value.exitStatus == nil, let port = writtenPort() else {
            if process.isRunning { process.interrupt() }
            try? FileManager.default.removeItem(at: directory)
            throw TestHTTPError("runloopd did not start: \(output.value.log)")
        }
        return ServerProcess(process: process, port: port, output: output, directory: directory)
    }

    /// Starts `executable arguments`, a server that listens on `port`, and waits,
    /// while it runs, until a connection to it succeeds (`timeout` seconds only
    /// catch a start that hangs).
    ///
    /// `logged`: also wait for a line of its own log with these words and
    /// `port=<port>`, so that a connection to another process that took the
    /// port meanwhile (tests run in parallel) is not taken for this one's.
    public static func listening(
        executable: URL, arguments: [String], port: UInt16, logged: String? = nil, timeout: Double = startTimeout
    ) throws -> ServerProcess {
        // A runloopd among them keeps its history store in a folder of its own.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "runloopd-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let environment = ProcessInfo.processInfo.environment.merging(
            ["XDG_STATE_HOME": directory.path, "RUNLOOPD_DRAIN_DELAY": "0"]
        ) { _, own in own }
        let (process, output) = try launch(executable, arguments, environment: environment)
        func ownLine() -> Bool {
            guard let logged else { return true }
            return output.value.log.split(separator: "\n").contains {
                $0.contains(logged) && $0.contains("port=\(port)")
            }
        }
        let up = output.wait(timeout: timeout, recheckEvery: 0.02) {
            output.value.exitStatus != nil
                || (ownLine() && (try? TestHTTPConnection(port: port, timeout: 1)) != nil)
        }
        guard up, output.value.exitStatus == nil else {
            if process.isRunning { process.terminate() }
            try? FileManager.default.removeItem(at: directory)
            throw TestHTTPError("\(executable.path) did not listen on \(port): \(output.value.log)")
        }
        return ServerProcess(process: process, port: port, output: output, directory: directory)
    }

    private static func launch(
        _ executable: URL, _ arguments: [String], environment: [String: String]?, workingDirectory: URL? = nil
    ) throws -> (Process, Monitor<Output>) {
        let process = Process()
        process.executableURL = executable
        if let workingDirectory { process.currentDirectoryURL = workingDirectory }
        process.arguments = arguments
        if let environment { process.environment = environment }
        let output = Monitor(Output())
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        // The log is read by a thread of its own, in blocking reads until the
        // pipe's end: Foundation's `readabilityHandler` is served by
        // libdispatch's event loop, which on Linux crashes the test process
        // (a segfault in `_dispatch_event_loop_drain`) with many pipes open
        // at once (swift-corelibs-foundation issue 3276; seen here once,
        // in a fresh clone's `make test`).
        let reading = errors.fileHandleForReading
        let reader = Thread {
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(reading.fileDescriptor, $0.baseAddress, $0.count) }
                if count < 0, errno == EINTR { continue }
                guard count > 0 else { break }
                let text = String(decoding: buffer[..<count], as: UTF8.self)
                output.update { $0.log += text }
            }
            output.update { $0.logEnded = true }
        }
        process.terminationHandler = { finished in
            let status = finished.terminationStatus
            output.update { $0.exitStatus = status }
        }
        try process.run()
        reader.start()
        return (process, output)
    }

    /// Sends `signal` to the process.
    public func send(signal: Int32) { kill(process.processIdentifier, signal) }

    /// Waits for the process to exit; its status, or nil after `timeout` seconds.
    /// Once it exited, waits (5 s at most) for its stderr's end too, so that
    /// `log` then holds its last lines (the exit is often seen first).
    public func waitForExit(timeout: Double) -> Int32? {
        output.wait(timeout: timeout) { $0.exitStatus != nil }
        guard let status = output.value.exitStatus else { return nil }
        output.wait(timeout: 5) { $0.logEnded }
        return status
    }

    /// A server its test never stopped (one it signalled itself, or a failed
    /// test's) is killed, and its folder removed, once nobody holds it.
    deinit {
        if output.value.exitStatus == nil { kill(process.processIdentifier, SIGKILL) }
        if let directory { try? FileManager.default.removeItem(at: directory) }
    }

    /// Sends `signal` (SIGTERM), then SIGKILL if the process has not exited
    /// within `grace` seconds, and waits for its exit (5 s more at most); removes
    /// the temporary folder.
    public func stop(signal: Int32 = SIGTERM, grace: Double = 5) {
        if output.value.exitStatus == nil {
            send(signal: signal)
            if waitForExit(timeout: grace) == nil {
                send(signal: SIGKILL)
                _ = waitForExit(timeout: 5)
            }
        }
        if let directory { try? FileManager.default.removeItem(at: directory) }
    }
}

/// A TCP port on 127.0.0.1 that was free a moment ago (bound to 0, read, closed),
/// for servers that cannot pick their own and say which.
public func freeLoopbackPort() -> UInt16 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
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
