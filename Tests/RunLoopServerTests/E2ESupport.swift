import Foundation
import RunLoopCore
import RunLoopServer

#if canImport(Glibc)
    import Glibc
#endif

// End-to-end support: start the real `runloopd` binary on a free loopback
// port and speak HTTP/1.1 to it over plain sockets (full control over methods,
// headers and bodies; no client library quirks). Every wait has a deadline;
// nothing sleeps.

/// A failure of the test harness itself (not an assertion).
struct E2EError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Where the package and the `runloopd` binary are.
enum E2EPaths {
    /// The package root: the first folder above this file holding `Package.swift`.
    static let packageRoot: URL = {
        var dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        while dir.path != "/" {
            if FileManager.default.fileExists(atPath: dir.appendingPathComponent("Package.swift").path) { return dir }
            dir.deleteLastPathComponent()
        }
        return URL(fileURLWithPath: FileManager.default.currentDirectoryPath)
    }()

    /// `RUNLOOPD_BINARY`, else `runloopd` next to the test binary (the same
    /// build folder), else the newest `.build*/debug/runloopd` of the package.
    static let binary: URL? = {
        let fm = FileManager.default
        if let explicit = ProcessInfo.processInfo.environment["RUNLOOPD_BINARY"], fm.isExecutableFile(atPath: explicit)
        {
            return URL(fileURLWithPath: explicit)
        }
        var dir = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = dir.appendingPathComponent("runloopd")
            if fm.isExecutableFile(atPath: candidate.path) { return candidate }
            dir.deleteLastPathComponent()
        }
        let builds = (try? fm.contentsOfDirectory(atPath: packageRoot.path)) ?? []
        let candidates = builds.filter { $0.hasPrefix(".build") }.map {
            packageRoot.appendingPathComponent($0).appendingPathComponent("debug").appendingPathComponent("runloopd")
        }.filter { fm.isExecutableFile(atPath: $0.path) }
        func modified(_ url: URL) -> Date {
            ((try? fm.attributesOfItem(atPath: url.resolvingSymlinksInPath().path))?[.modificationDate] as? Date)
                ?? .distantPast
        }
        return candidates.max { modified($0) < modified($1) }
    }()

    static var publicDirectory: String { packageRoot.appendingPathComponent("Public").path }
}

/// A condition variable around a value, waited on with deadlines.
final class E2EMonitor<State: Sendable>: @unchecked Sendable {
    private let condition = NSCondition()
    private var state: State

    init(_ state: State) { self.state = state }

    /// Changes the state and wakes waiters.
    func update(_ change: (inout State) -> Void) {
        condition.lock()
        change(&state)
        condition.broadcast()
        condition.unlock()
    }

    /// The state now.
    var value: State {
        condition.lock()
        defer { condition.unlock() }
        return state
    }

    /// Waits until `predicate` holds or `timeout` seconds pass; returns whether it held.
    @discardableResult
    func wait(timeout: Double, until predicate: (State) -> Bool) -> Bool {
        let deadline = Date(timeIntervalSinceNow: timeout)
        condition.lock()
        defer { condition.unlock() }
        while !predicate(state) {
            if !condition.wait(until: deadline) { return predicate(state) }
        }
        return true
    }
}

/// One running `runloopd` process.
final class RunLoopd: @unchecked Sendable {
    struct Output: Sendable {
        var log = ""
        var exitStatus: Int32?
    }

    let process: Process
    let port: UInt16
    let output: E2EMonitor<Output>
    private let directory: URL

    var client: E2EClient { E2EClient(port: port) }
    var pid: Int32 { process.processIdentifier }
    var log: String { output.value.log }

    private init(process: Process, port: UInt16, output: E2EMonitor<Output>, directory: URL) {
        self.process = process
        self.port = port
        self.output = output
        self.directory = directory
    }

    /// Starts `runloopd --port 0 --port-file … --public-dir Public` plus `arguments`
    /// (with `environment` added to the inherited one, minus its `RUNLOOPD_*`) and waits (at most 20 s) until it wrote its port.
    static func start(_ arguments: [String] = [], environment: [String: String] = [:]) throws -> RunLoopd {
        guard let binary = E2EPaths.binary else {
            throw E2EError("no runloopd binary: run swift build first (or set RUNLOOPD_BINARY)")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "runloopd-e2e-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let portFile = directory.appendingPathComponent("port")
        let process = Process()
        process.executableURL = binary
        process.arguments =
            ["--port", "0", "--port-file", portFile.path, "--public-dir", E2EPaths.publicDirectory] + arguments
        process.environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("RUNLOOPD_") }
            .merging(environment) { _, given in given }
        let output = E2EMonitor(Output())
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        errors.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            if data.isEmpty {
                handle.readabilityHandler = nil
                return
            }
            output.update { $0.log += String(decoding: data, as: UTF8.self) }
        }
        process.terminationHandler = { finished in
            let status = finished.terminationStatus
            output.update { $0.exitStatus = status }
        }
        try process.run()
        let started = output.wait(timeout: 20) { $0.log.contains("port file written") || $0.exitStatus != nil }
        guard started, output.value.exitStatus == nil,
            let text = try? String(contentsOf: portFile, encoding: .utf8),
            let port = UInt16(text.trimmingCharacters(in: .whitespacesAndNewlines))
        else {
            if process.isRunning { process.interrupt() }
            throw E2EError("runloopd did not start: \(output.value.log)")
        }
        return RunLoopd(process: process, port: port, output: output, directory: directory)
    }

    /// Sends `signal` to the process.
    func send(signal: Int32) { kill(process.processIdentifier, signal) }

    /// Waits for the process to exit; its status, or nil after `timeout`.
    func waitForExit(timeout: Double) -> Int32? {
        output.wait(timeout: timeout) { $0.exitStatus != nil }
        return output.value.exitStatus
    }

    /// SIGTERM, then SIGKILL if it has not exited within 5 s; removes the temporary folder.
    func stop() {
        if output.value.exitStatus == nil {
            send(signal: SIGTERM)
            if waitForExit(timeout: 5) == nil {
                send(signal: SIGKILL)
                _ = waitForExit(timeout: 5)
            }
        }
        try? FileManager.default.removeItem(at: directory)
    }

    /// Runs `body` against a fresh server and always stops it.
    static func with<T>(_ arguments: [String] = [], _ body: (RunLoopd) async throws -> T) async throws -> T {
        let server = try start(arguments)
        defer { server.stop() }
        return try await body(server)
    }
}

/// One HTTP answer.
struct E2EResponse: Sendable, CustomStringConvertible {
    let status: Int
    let headers: [(String, String)]
    let body: [UInt8]

    /// The first header named `name` (case-insensitive).
    func header(_ name: String) -> String? {
        headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }

    var text: String { String(decoding: body, as: UTF8.self) }

    /// The body as JSON (`.null` when it is not JSON).
    var json: Value { (try? JSON.parse(body)) ?? .null }

    /// A member of the JSON body.
    subscript(_ keys: String...) -> Value { json.member(keys) }

    var description: String { "\(status) \(text)" }
}

extension Value {
    /// The value at a path of object keys (`.null` when absent).
    func member(_ keys: [String]) -> Value {
        var current = self
        for key in keys { current = current.object?[key] ?? .null }
        return current
    }

    /// The value at a path of object keys.
    subscript(_ keys: String...) -> Value { member(keys) }

    /// A list's items (empty for anything else).
    var items: [Value] {
        if case .array(let items) = self { return items }
        return []
    }
}

/// A blocking TCP connection to the loopback address.
struct E2ESocket: ~Copyable {
    let fd: Int32

    init(port: UInt16, timeout: Double) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw E2EError("socket: \(errno)") }
        var tv = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - timeout.rounded(.down)) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            let code = errno
            close(fd)
            throw E2EError("connect to port \(port): errno \(code)")
        }
    }

    deinit { close(fd) }

    /// Writes all of `bytes`; false if the peer closed first.
    func write(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return false }
            offset += n
        }
        return true
    }

    /// Reads what is there (blocking up to the timeout); empty at end of stream.
    func read() throws -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: 16_384)
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n < 0 {
            if errno == ECONNRESET { return [] }
            throw E2EError("recv: errno \(errno) (timed out?)")
        }
        return Array(buffer[0..<n])
    }

    /// Closes the sending side (the server then sees the end of the request stream).
    func shutdownBoth() { shutdown(fd, Int32(SHUT_RDWR)) }
}

/// HTTP/1.1 framing helpers.
enum E2EHTTP {
    static func request(
        _ method: String, _ path: String, body: [UInt8]?, contentType: String?, headers: [(String, String)]
    ) -> [UInt8] {
        // A Host among `headers` replaces the default one (the rebinding tests send foreign ones).
        let customHost = headers.contains { $0.0.lowercased() == "host" }
        var head = "\(method) \(path) HTTP/1.1\r\n\(customHost ? "" : "Host: 127.0.0.1\r\n")Connection: close\r\n"
        if let contentType { head += "Content-Type: \(contentType)\r\n" }
        if let body { head += "Content-Length: \(body.count)\r\n" }
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        head += "\r\n"
        return Array(head.utf8) + (body ?? [])
    }

    /// Splits a raw response; nil until the header block is complete.
    static func parseHead(_ data: [UInt8]) -> (status: Int, headers: [(String, String)], bodyStart: Int)? {
        guard let end = find([13, 10, 13, 10], in: data) else { return nil }
        let lines = String(decoding: data[0..<end], as: UTF8.self).components(separatedBy: "\r\n")
        let statusParts = lines.first?.split(separator: " ") ?? []
        let status = statusParts.count > 1 ? Int(statusParts[1]) ?? 0 : 0
        var headers: [(String, String)] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers.append(
                (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        return (status, headers, end + 4)
    }

    static func find(_ needle: [UInt8], in data: [UInt8], from start: Int = 0) -> Int? {
        guard data.count >= needle.count else { return nil }
        var i = start
        while i + needle.count <= data.count {
            if data[i] == needle[0] && Array(data[i..<(i + needle.count)]) == needle { return i }
            i += 1
        }
        return nil
    }

    /// Decodes as much of a chunked body as is complete; returns the payload and
    /// whether the last chunk was seen.
    static func dechunk(_ data: [UInt8]) -> (payload: [UInt8], consumed: Int, done: Bool) {
        var payload: [UInt8] = []
        var i = 0
        while let lineEnd = find([13, 10], in: data, from: i) {
            let sizeText = String(decoding: data[i..<lineEnd], as: UTF8.self).split(separator: ";").first ?? ""
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16) else { break }
            if size == 0 { return (payload, data.count, true) }
            let start = lineEnd + 2
            guard start + size + 2 <= data.count else { break }
            payload += data[start..<(start + size)]
            i = start + size + 2
        }
        return (payload, i, false)
    }
}

/// A client for one server: each request on its own connection.
struct E2EClient: Sendable {
    let port: UInt16

    /// Sends one request and reads the whole answer, blocking the calling thread.
    func sendBlocking(
        _ method: String, _ path: String, body: [UInt8]? = nil, contentType: String? = nil,
        headers: [(String, String)] = [], timeout: Double = 20
    ) throws -> E2EResponse {
        let socket = try E2ESocket(port: port, timeout: timeout)
        _ = socket.write(E2EHTTP.request(method, path, body: body, contentType: contentType, headers: headers))
        var data: [UInt8] = []
        while true {
            let chunk = try socket.read()
            if chunk.isEmpty { break }
            data += chunk
            // Stop at a complete Content-Length body (the server may keep the connection).
            if let head = E2EHTTP.parseHead(data),
                let length = head.headers.first(where: { $0.0.lowercased() == "content-length" }).flatMap({ Int($0.1) }
                ),
                data.count - head.bodyStart >= length
            {
                break
            }
        }
        guard let head = E2EHTTP.parseHead(data) else {
            throw E2EError("no HTTP answer to \(method) \(path): \(String(decoding: data, as: UTF8.self))")
        }
        var body = Array(data[head.bodyStart...])
        if head.headers.contains(where: { $0.0.lowercased() == "transfer-encoding" && $0.1.lowercased() == "chunked" })
        {
            body = E2EHTTP.dechunk(body).payload
        }
        return E2EResponse(status: head.status, headers: head.headers, body: body)
    }

    /// Sends one request from a background thread (never blocks the test's executor).
    func send(
        _ method: String, _ path: String, body: [UInt8]? = nil, contentType: String? = nil,
        headers: [(String, String)] = [], timeout: Double = 20
    ) async throws -> E2EResponse {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(
                    with: Result {
                        try sendBlocking(
                            method, path, body: body, contentType: contentType, headers: headers, timeout: timeout)
                    })
            }
        }
    }

    func get(_ path: String) async throws -> E2EResponse { try await send("GET", path) }

    func delete(_ path: String) async throws -> E2EResponse { try await send("DELETE", path) }

    /// POST with a JSON body (none when `json` is nil).
    func post(_ path: String, _ json: Value? = nil, timeout: Double = 20) async throws -> E2EResponse {
        try await send(
            "POST", path, body: json.map(JSON.serialize), contentType: json == nil ? nil : "application/json",
            timeout: timeout)
    }

    /// Creates a thread; returns its id.
    func createThread(_ body: Value = [:]) async throws -> String {
        let response = try await post("/api/threads", body)
        guard response.status == 201, let id = response["id"].string else {
            throw E2EError("create thread: \(response)")
        }
        return id
    }

    /// A manual thread (runs only on request).
    func manualThread(keepAlive: String = "port") async throws -> String {
        try await createThread(["keepAlive": .string(keepAlive), "run": ["style": "manual"]])
    }

    /// Polls `GET path` until `predicate` holds on the answer, within `timeout`.
    /// Each poll is a real round trip through the control loop.
    func poll(_ path: String, timeout: Double = 10, until predicate: (E2EResponse) -> Bool) async throws -> E2EResponse
    {
        let deadline = Date(timeIntervalSinceNow: timeout)
        var last = try await get(path)
        while !predicate(last) {
            guard Date() < deadline else { throw E2EError("condition on \(path) not met in \(timeout) s: \(last)") }
            last = try await get(path)
        }
        return last
    }

    /// Waits until the thread is inside a run and asleep in epoll
    /// (`CFRunLoopIsWaiting`), so a stop or a signal lands in that run.
    func waitUntilWaiting(_ thread: String, timeout: Double = 10) async throws {
        _ = try await poll("/api/threads/\(thread)", timeout: timeout) { $0["state"] == "waiting" }
    }
}

/// One Server-Sent-Events connection read on its own thread.
final class E2EEventStream: @unchecked Sendable {
    struct Event: Sendable {
        let name: String
        let data: Value
        let receivedAt: Date
    }

    struct State: Sendable {
        var events: [Event] = []
        var status: Int?
        var closed = false
    }

    let state = E2EMonitor(State())
    private let fd: Int32

    /// Connects to `GET path` and starts reading.
    init(port: UInt16, path: String = "/api/events") throws {
        let fd = try Self.connect(port: port)
        self.fd = fd
        let request = Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        let state = self.state
        Thread.detachNewThread { Self.readLoop(fd: fd, state: state) }
    }

    private static func connect(port: UInt16) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw E2EError("socket: \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            Glibc.close(fd)
            throw E2EError("connect: \(errno)")
        }
        return fd
    }

    private static func readLoop(fd: Int32, state: E2EMonitor<State>) {
        var raw: [UInt8] = []
        var bodyStart: Int?
        var chunked = false
        var consumed = 0
        var text: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            raw += buffer[0..<n]
            if bodyStart == nil, let head = E2EHTTP.parseHead(raw) {
                bodyStart = head.bodyStart
                consumed = head.bodyStart
                chunked = head.headers.contains { $0.0.lowercased() == "transfer-encoding" }
                state.update { $0.status = head.status }
            }
            guard bodyStart != nil else { continue }
            if chunked {
                let decoded = E2EHTTP.dechunk(Array(raw[consumed...]))
                text += decoded.payload
                consumed += decoded.consumed
            } else {
                text += raw[consumed...]
                consumed = raw.count
            }
            // Complete events end with a blank line.
            while let end = E2EHTTP.find([10, 10], in: text) {
                let block = String(decoding: text[0..<end], as: UTF8.self)
                text.removeFirst(end + 2)
                var name = "message"
                var data = ""
                for line in block.split(separator: "\n", omittingEmptySubsequences: false) {
                    if line.hasPrefix("event:") { name = line.dropFirst(6).trimmingCharacters(in: .whitespaces) }
                    if line.hasPrefix("data:") {
                        data += (data.isEmpty ? "" : "\n") + line.dropFirst(5).trimmingCharacters(in: .whitespaces)
                    }
                }
                if name == "message" && data.isEmpty { continue }  // a heartbeat comment
                let event = Event(name: name, data: (try? JSON.parse(Array(data.utf8))) ?? .null, receivedAt: Date())
                state.update { $0.events.append(event) }
            }
        }
        // The reader owns the descriptor: it closes it under the state lock, so
        // `disconnect` never shuts down a reused descriptor.
        state.update {
            $0.closed = true
            Glibc.close(fd)
        }
    }

    /// Waits for an event matching `predicate`; returns it, or nil after `timeout`.
    func next(timeout: Double, where predicate: (Event) -> Bool) -> Event? {
        var found: Event?
        state.wait(timeout: timeout) { state in
            found = state.events.first(where: predicate)
            return found != nil || state.closed
        }
        return found
    }

    /// Closes the connection (the reader thread ends and closes the descriptor).
    func disconnect() {
        let fd = self.fd
        state.update { if !$0.closed { shutdown(fd, Int32(SHUT_RDWR)) } }
    }

    deinit { disconnect() }
}
