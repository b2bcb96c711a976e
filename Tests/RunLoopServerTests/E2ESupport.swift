import MicroHTTP
import Foundation
import RunLoopCore
import RunLoopServer
import RunLoopTestSupport

// End-to-end support: the real `runloopd` binary on a free loopback port,
// spoken to over plain sockets (full control over methods, headers and
// bodies; no client library quirks). The client, event-stream reader, launcher
// and waits are RunLoopTestSupport's (shared with the benchmarks); the names
// here are what the e2e tests call them. Every wait has a deadline; nothing
// sleeps.

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

extension ServerProcess {
    var client: E2EClient { E2EClient(port: port) }

    /// Writes `token` into the `--token-file` `file`, sends SIGHUP and waits
    /// (10 s) for the line that says the token was reloaded: whether it came.
    func rotateToken(to token: String, in file: URL) async throws -> Bool {
        try Data("\(token)\n".utf8).write(to: file)
        send(signal: SIGHUP)
        return await logged(timeout: 10) { $0.contains("SIGHUP: reloaded") && $0.contains("tokenRotated=true") }
    }

    /// Starts `runloopd --port 0 --port-file … --public-dir Public` plus `arguments`
    /// (with `environment` added to the inherited one, minus its `RUNLOOPD_*`)
    /// and waits, while it runs, until it listens (`startTimeout` catches a hang).
    static func start(_ arguments: [String] = [], environment: [String: String] = [:]) throws -> ServerProcess {
        guard let binary = E2EPaths.binary else {
            throw TestHTTPError("no runloopd binary: run swift build first (or set RUNLOOPD_BINARY)")
        }
        return try runloopd(
            binary: binary, arguments: ["--public-dir", E2EPaths.publicDirectory] + arguments, environment: environment)
    }

    /// `start` without holding a cooperative thread while it waits (see `offThePool`).
    static func started(_ arguments: [String] = [], environment: [String: String] = [:]) async throws -> ServerProcess {
        try await offThePool { try start(arguments, environment: environment) }
    }

    /// Runs the binary with `arguments` until it exits (killed after `timeout`
    /// seconds): its status and output, waited for off the cooperative pool.
    static func runToExit(
        _ arguments: [String], environment: [String: String] = [:], timeout: Double = startTimeout
    ) async throws -> (Int32?, String) {
        try await offThePool { try runToExitBlocking(arguments, environment: environment, timeout: timeout) }
    }

    /// `runToExit`, blocking the calling thread. The output is read to its end
    /// (the child's exit closes the pipe), so nothing waits on a readability callback.
    private static func runToExitBlocking(
        _ arguments: [String], environment: [String: String], timeout: Double
    ) throws -> (Int32?, String) {
        guard let binary = E2EPaths.binary else { throw TestHTTPError("no runloopd binary") }
        let process = Process()
        process.executableURL = binary
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("RUNLOOPD_") }
            .merging(environment) { _, given in given }
        let pipe = Pipe()
        process.standardError = pipe
        process.standardOutput = pipe
        let exited = Monitor<Int32?>(nil)
        process.terminationHandler = { finished in
            let status = finished.terminationStatus
            exited.update { $0 = status }
        }
        try process.run()
        let watchdog = DispatchWorkItem { [process] in if process.isRunning { process.terminate() } }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: watchdog)
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        watchdog.cancel()
        // The pipe's end comes with the exit; Foundation reports the status a
        // moment later (much later in a loaded ThreadSanitizer run).
        exited.wait(timeout: max(20, startTimeout)) { $0 != nil }
        return (exited.value, String(decoding: data, as: UTF8.self))
    }

    /// Runs `body` against a fresh server and always stops it (starting and
    /// stopping off the cooperative pool).
    static func with<T>(_ arguments: [String] = [], _ body: (ServerProcess) async throws -> T) async throws -> T {
        let server = try await started(arguments)
        do {
            let result = try await body(server)
            await server.stopped()
            return result
        } catch {
            await server.stopped()
            throw error
        }
    }

    /// `with`, given its client and one thread whose loop the test runs by hand
    /// (`keepAlive: port`, `run.style: manual`).
    static func withManualThread<T>(_ body: (E2EClient, String) async throws -> T) async throws -> T {
        try await with { server in
            let client = server.client
            return try await body(client, try await client.manualThread())
        }
    }
}

extension TestHTTPResponse {
    /// The body as JSON (`.null` when it is not JSON).
    var json: Value { (try? JSON.parse(body)) ?? .null }

    /// A member of the JSON body.
    subscript(_ keys: String...) -> Value { json.member(keys) }
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

/// A client for one server: each request on its own connection.
struct E2EClient: Sendable {
    let port: UInt16

    /// Sends one request and reads the whole answer, blocking the calling thread.
    func sendBlocking(
        _ method: String, _ path: String, body: [UInt8]? = nil, contentType: String? = nil,
        headers: [(String, String)] = [], timeout: Double = 20
    ) throws -> TestHTTPResponse {
        try TestHTTPConnection(port: port, timeout: timeout).request(
            method, path, body: body, contentType: contentType, headers: headers)
    }

    /// Sends one request from a background thread (never blocks the test's executor).
    func send(
        _ method: String, _ path: String, body: [UInt8]? = nil, contentType: String? = nil,
        headers: [(String, String)] = [], timeout: Double = 20
    ) async throws -> TestHTTPResponse {
        try await timedSend(method, path, body: body, contentType: contentType, headers: headers, timeout: timeout).0
    }

    /// `send`, with the seconds from sending to the answer's last byte, measured
    /// on the sending thread: what the server took, without the time the test
    /// process's cooperative pool (2 threads on 2 cores, shared with every
    /// suite) takes to resume the caller.
    func timedSend(
        _ method: String, _ path: String, body: [UInt8]? = nil, contentType: String? = nil,
        headers: [(String, String)] = [], timeout: Double = 20
    ) async throws -> (TestHTTPResponse, Double) {
        try await offThePool {
            try timedBlocking(method, path, body: body, contentType: contentType, headers: headers, timeout: timeout)
        }
    }

    /// `sendBlocking`, with the seconds from sending to the answer's last byte.
    func timedBlocking(
        _ method: String, _ path: String, body: [UInt8]? = nil, contentType: String? = nil,
        headers: [(String, String)] = [], timeout: Double = 20
    ) throws -> (TestHTTPResponse, Double) {
        let started = Monotonic.now()
        let response = try sendBlocking(
            method, path, body: body, contentType: contentType, headers: headers, timeout: timeout)
        return (response, Monotonic.now() - started)
    }

    /// `post`, timed as `timedSend` times it.
    func timedPost(_ path: String, _ json: Value? = nil, timeout: Double = 20) async throws -> (
        TestHTTPResponse, Double
    ) {
        try await timedSend(
            "POST", path, body: json.map(JSON.serialize), contentType: json == nil ? nil : "application/json",
            timeout: timeout)
    }

    func get(_ path: String) async throws -> TestHTTPResponse { try await send("GET", path) }

    func delete(_ path: String) async throws -> TestHTTPResponse { try await send("DELETE", path) }

    /// POST with a JSON body (none when `json` is nil).
    func post(_ path: String, _ json: Value? = nil, timeout: Double = 20) async throws -> TestHTTPResponse {
        try await send(
            "POST", path, body: json.map(JSON.serialize), contentType: json == nil ? nil : "application/json",
            timeout: timeout)
    }

    /// `perform` of `echo` with `n` on `thread`, waiting for its answer (in the
    /// history: a perform and its request).
    func echo(on thread: String, _ n: Int) async throws -> TestHTTPResponse {
        try await post(
            "/api/threads/\(thread)/perform",
            ["selector": "echo", "args": ["n": .number(Double(n))], "waitUntilDone": true])
    }

    /// Creates a thread; returns its id.
    func createThread(_ body: Value = [:]) async throws -> String {
        let response = try await post("/api/threads", body)
        guard response.status == 201, let id = response["id"].string else {
            throw TestHTTPError("create thread: \(response)")
        }
        return id
    }

    /// A manual thread (runs only on request).
    func manualThread(keepAlive: String = "port") async throws -> String {
        try await createThread(["keepAlive": .string(keepAlive), "run": ["style": "manual"]])
    }

    /// Polls `GET path` until `predicate` holds on the answer, within `timeout`.
    /// Each poll is a real round trip through the control loop.
    ///
    /// The whole loop runs on a thread of its own: a deadline counted while the
    /// test process's cooperative pool is busy with other suites would pass
    /// with the condition checked once or twice, on an answer seconds old.
    func poll(
        _ path: String, timeout: Double = 10, until predicate: @escaping @Sendable (TestHTTPResponse) -> Bool
    ) async throws -> TestHTTPResponse {
        try await offThePool { try pollBlocking(path, timeout: timeout, until: predicate) }
    }

    /// `poll`, blocking the calling thread.
    func pollBlocking(
        _ path: String, timeout: Double = 10, until predicate: (TestHTTPResponse) -> Bool
    ) throws -> TestHTTPResponse {
        // Scaled under ThreadSanitizer (E2E_SLOWDOWN), where every round trip is slower.
        let timeout = timeout * ServerProcess.slowdown
        let deadline = Monotonic.now() + timeout
        var last = try pollOnce(path)
        while !predicate(last) {
            guard Monotonic.now() < deadline else {
                throw TestHTTPError("condition on \(path) not met in \(timeout) s: \(last)")
            }
            last = try pollOnce(path)
        }
        return last
    }

    /// One poll's `GET`. A connection that ends with no answer at all is
    /// asked again once, and said loudly with the server's connection
    /// counters (what its budgets closed): the fleet test once lost one poll
    /// of thousands on a busy machine, cause not yet known. Twice in a row
    /// fails the test.
    private func pollOnce(_ path: String) throws -> TestHTTPResponse {
        do {
            return try sendBlocking("GET", path)
        } catch let error as TestHTTPError where error.description.hasPrefix("no HTTP answer") {
            let counters = ((try? sendBlocking("GET", "/metrics"))?.text ?? "no answer either")
                .split(separator: "\n").filter { $0.hasPrefix("runloopd_http_connections") }
            print("E2E poll: GET \(path) on port \(port) got no answer (\(error)); asked again. \(counters)")
            return try sendBlocking("GET", path)
        }
    }

    /// Waits until the thread is inside a run and asleep in epoll
    /// (`CFRunLoopIsWaiting`), so a stop or a signal lands in that run.
    func waitUntilWaiting(_ thread: String, timeout: Double = 60) async throws {
        _ = try await poll("/api/threads/\(thread)", timeout: timeout) { $0["state"] == "waiting" }
    }
}

extension EventStreamClient where Payload == Value {
    /// Connects to `GET path` and starts reading; each event's data is parsed as JSON.
    convenience init(port: UInt16, path: String = "/api/events") throws {
        try self.init(port: port, path: path) { (try? JSON.parse(Array($0.utf8))) ?? .null }
    }
}
