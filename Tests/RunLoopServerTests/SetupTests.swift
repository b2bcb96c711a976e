import Foundation
import RunLoopCore
import RunLoopServer
import RunLoopTestSupport
import Testing

/// `runloopd --setup FILE` and `GET /api/setup`, against the real binary.
@Suite("Declared setups")
struct SetupTests {
    /// Three threads and every kind of item: sources (custom, port, in several
    /// modes), timers (actions, modes, maxFires, one-shot), observers, a
    /// suspended task queue, delayed and pending performs, added common
    /// modes, every keep-alive, cross-thread aliases in signal and performOn.
    /// Nothing in it changes on its own: the items that could fire away
    /// (one-shot timers and observers, tasks, performs) are on a manual thread
    /// that never runs or far in the future.
    static let full: Value = [
        "version": 1,
        "description": "the round-trip fixture",
        "threads": [
            [
                "id": "ticker", "name": "ticker",
                "timers": [
                    [
                        "interval": 0.05,
                        "action": ["selector": "signal", "args": ["thread": "worker", "source": "inbox"]],
                    ],
                    ["interval": 3600, "tolerance": 0.5, "maxFires": 7, "action": ["selector": "count"]],
                ],
                "observers": [["activities": ["entry", "exit"]]],
            ],
            [
                "id": "worker", "name": "worker", "keepAlive": "timer", "commonModes": ["tracking"],
                "sources": [
                    [
                        "id": "inbox", "kind": "custom", "order": 2,
                        "action": ["selector": "count", "args": ["name": "signals"]],
                    ],
                    ["id": "mailbox", "kind": "port", "mode": "common", "action": ["selector": "echo"]],
                    ["id": "both", "kind": "custom", "modes": ["default", "tracking"]],
                ],
                "observers": [
                    [
                        "activities": ["beforeWaiting"], "mode": "default", "order": -1,
                        "action": ["selector": "count", "args": ["name": "sleeps"]],
                    ]
                ],
            ],
            [
                "id": "manual", "keepAlive": "none",
                "run": ["style": "manual", "mode": "tracking", "seconds": 2, "returnAfterSourceHandled": true],
                "sources": [["id": "inbox", "kind": "custom"]],
                "timers": [
                    ["interval": 0.5, "mode": "tracking", "modes": ["default"]],
                    ["interval": 2, "repeats": false, "delay": 1],
                ],
                "observers": [["activities": "all", "repeats": false, "mode": "tracking"]],
                "tasksSuspended": true,
                "tasks": [
                    ["id": "warm", "selector": "step", "args": ["until": 3]],
                    ["id": "poke", "selector": "signal", "args": ["thread": "worker", "source": "both"]],
                ],
                "performs": [
                    ["selector": "log", "args": ["message": "later"], "afterDelay": 3600],
                    [
                        "selector": "performOn",
                        "args": ["thread": "worker", "selector": "signal", "args": ["source": "inbox"]],
                    ],
                    ["selector": "signal", "args": ["source": "inbox"], "modes": ["tracking"]],
                ],
            ],
        ],
    ]

    static func write(_ value: Value) throws -> URL {
        try write(Data(JSON.serialize(value)))
    }

    static func write(_ data: Data) throws -> URL {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent(
            "runloopd-setup-\(UUID().uuidString).json")
        try data.write(to: file)
        return file
    }

    @Test("round trip: a setup applied, exported, applied to a second runloopd, exports the same document")
    func roundTrip() async throws {
        let file = try Self.write(Self.full)
        defer { try? FileManager.default.removeItem(at: file) }
        let first = try await ServerProcess.started(["--setup", file.path])
        defer { first.stop() }
        // Logged before the port file is written; read from the pipe a moment later.
        #expect(await first.logged(timeout: 10) { $0.contains("setup applied") }, "\(first.log)")
        // The port file is written after the setup: ready at once.
        #expect(try await first.client.get("/readyz").status == 200)
        let exported = try await first.client.get("/api/setup")
        #expect(exported.status == 200)
        let export = exported.json
        let threads = export["threads"].items
        try #require(threads.count == 3, "\(export)")
        let (ticker, worker, manual) = (threads[0], threads[1], threads[2])
        #expect(ticker["name"] == "ticker")
        #expect(worker["keepAlive"] == "timer")
        #expect(worker["commonModes"] == ["tracking"])
        #expect(manual["keepAlive"] == "none")
        #expect(
            manual["run"] == ["style": "manual", "mode": "tracking", "seconds": 2, "returnAfterSourceHandled": true])
        #expect(ticker["timers"].items.count == 2)
        #expect(ticker["timers"].items.last?["maxFires"] == 7)
        #expect(ticker["timers"].items.last?["tolerance"] == 0.5)
        #expect(worker["sources"].items.map { $0["kind"] } == ["custom", "port", "custom"])
        #expect(worker["sources"].items.last?["modes"] == ["default", "tracking"])
        #expect(worker["observers"].items.first?["order"] == -1)
        #expect(manual["timers"].items.first?["modes"] == ["default"])
        #expect(manual["timers"].items.last?["repeats"] == false)
        #expect(manual["observers"].items.first?["activities"].items.count == Activity.allCases.count)
        #expect(manual["tasksSuspended"] == true)
        #expect(manual["tasks"].items.map { $0["id"] } == ["warm", "poke"])
        #expect(manual["performs"].items.map { $0["selector"] } == ["log", "performOn", "signal"])
        #expect(manual["performs"].items.first?["afterDelay"] == 3600)
        // The keep-alives the service adds (worker's timer, ticker's port) are not exported.
        #expect(worker["timers"].items.isEmpty)
        #expect(ticker["sources"].items.isEmpty)

        let again = try Self.write(Data(exported.body))
        defer { try? FileManager.default.removeItem(at: again) }
        // --read-only refuses users' changes, not the operator's setup.
        let second = try await ServerProcess.started(["--setup", again.path, "--read-only"])
        defer { second.stop() }
        let reexported = try await second.client.get("/api/setup")
        #expect(reexported.status == 200)
        #expect(reexported.json == export, "\(String(decoding: reexported.body, as: UTF8.self))")
    }

    @Test("aliases: a timer's signal reaches the source declared on another thread, by the ids the server gave")
    func crossThreadAliases() async throws {
        let file = try Self.write(Self.full)
        defer { try? FileManager.default.removeItem(at: file) }
        try await ServerProcess.with(["--setup", file.path]) { server in
            let c = server.client
            let export = try await c.get("/api/setup").json
            let threads = export["threads"].items
            try #require(threads.count == 3)
            let workerId = try #require(threads[1]["id"].string)
            let manualId = try #require(threads[2]["id"].string)
            let sources = threads[1]["sources"].items
            let inbox = try #require(sources.first?["id"].string)
            let both = try #require(sources.last?["id"].string)
            let manualInbox = try #require(threads[2]["sources"].items.first?["id"].string)
            // Aliases became server ids, in actions, tasks and nested performOn calls alike.
            let signal = threads[0]["timers"].items.first?["action"]["args"]
            #expect(signal?["thread"] == .string(workerId))
            #expect(signal?["source"] == .string(inbox))
            #expect(threads[2]["tasks"].items.last?["args"]["source"] == .string(both))
            let performOn = threads[2]["performs"].items[1]["args"]
            #expect(performOn["thread"] == .string(workerId))
            #expect(performOn["args"]["source"] == .string(inbox))
            // A signal without a thread names a source of its own thread: manual's inbox, not worker's.
            #expect(threads[2]["performs"].items[2]["args"]["source"] == .string(manualInbox))
            #expect(manualId != workerId)
            // The ticker's timer signals worker's inbox: its action counts.
            let log = try await c.poll("/api/threads/\(workerId)/log") { ($0["counters", "signals"].number ?? 0) >= 2 }
            #expect((log["counters", "signals"].number ?? 0) >= 2)
        }
    }

    /// A bad file: what it holds, and what the message must say besides the file's path.
    static let badFiles: [(String, String, [String])] = [
        ("not JSON", "{\"threads\": [", ["not JSON"]),
        ("not an object", "[1, 2]", ["must be a JSON object"]),
        (
            "unknown top-level field", #"{"thread": []}"#,
            ["unknown field thread", "accepted: description, threads, version"]
        ),
        ("bad version", #"{"version": 2, "threads": []}"#, ["version must be 1"]),
        (
            "unknown thread field (the API's error)", #"{"threads": [{"id": "a", "colour": "red"}]}"#,
            [#"thread "a" (threads[0])"#, "POST /api/threads answered 400 unknown_field", "unknown field colour"]
        ),
        (
            "unknown timer field (the API's error)",
            #"{"threads": [{"id": "a", "timers": [{"interval": 1, "every": 2}]}]}"#,
            [#"thread "a" (threads[0]) timers[0]"#, "unknown_field", "unknown field every", "also reads: modes"]
        ),
        (
            "a rejected step", #"{"threads": [{"id": "a", "timers": [{"interval": 1}, {"interval": -1}]}]}"#,
            [#"thread "a" (threads[0]) timers[1]"#, "/timers answered 400 bad_value", "(field interval)"]
        ),
        (
            "an unknown selector", #"{"threads": [{"sources": [{"kind": "custom", "action": {"selector": "nope"}}]}]}"#,
            ["threads[0] sources[0]", "answered 400 unknown_selector"]
        ),
        (
            "a bad run policy", #"{"threads": [{"id": "r", "run": {"style": "forever", "mode": "tracking"}}]}"#,
            [#"thread "r" (threads[0])"#, "answered 400 bad_value", "(field run.mode)"]
        ),
        (
            "a bad mode list", #"{"threads": [{"id": "m", "sources": [{"kind": "custom", "modes": "default"}]}]}"#,
            [#"thread "m" (threads[0]) sources[0] modes must be a list of mode names"#]
        ),
        ("a duplicate alias", #"{"threads": [{"id": "a"}, {"id": "a"}]}"#, [#"the id "a" is already used"#]),
    ]

    @Test("a bad file exits 78 before serving, naming the file, the item and the API's error", arguments: badFiles)
    func badFile(name: String, content: String, messages: [String]) async throws {
        let file = try Self.write(Data(content.utf8))
        defer { try? FileManager.default.removeItem(at: file) }
        let (status, log) = try await ServerProcess.runToExit(["--port", "0", "--setup", file.path])
        #expect(status == 78, "\(name): \(log)")
        #expect(log.contains("cannot start: setup file \(file.path): "), "\(name): \(log)")
        for message in messages { #expect(log.contains(message), "\(name): \(message) in \(log)") }
        #expect(!log.contains("setup applied"), "\(name): \(log)")
    }

    @Test("a missing setup file exits 78 and names it")
    func missingFile() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("no-such-setup-\(UUID().uuidString)")
            .path
        let (status, log) = try await ServerProcess.runToExit(["--port", "0", "--setup", path])
        #expect(status == 78, "\(log)")
        #expect(log.contains("setup file \(path): cannot be read"), "\(log)")
    }

    @Test("an empty setup is applied and exports no thread")
    func empty() async throws {
        let file = try Self.write(["threads": []])
        defer { try? FileManager.default.removeItem(at: file) }
        try await ServerProcess.with(["--setup", file.path]) { server in
            let export = try await server.client.get("/api/setup")
            #expect(export.json == ["version": 1, "threads": []])
        }
    }

    @Test("examples/setup.json applies, and deploy/kubernetes.yaml's ConfigMap holds the same file")
    func example() async throws {
        let example = E2EPaths.packageRoot.appendingPathComponent("examples/setup.json")
        let text = try String(contentsOf: example, encoding: .utf8)
        let manifest = try String(
            contentsOf: E2EPaths.packageRoot.appendingPathComponent("deploy/kubernetes.yaml"), encoding: .utf8)
        let block = try #require(manifest.range(of: "  setup.json: |\n"))
        let embedded = manifest[block.upperBound...].split(separator: "\n", omittingEmptySubsequences: false)
            .prefix { $0.isEmpty || $0.hasPrefix("    ") }.map { $0.dropFirst(min(4, $0.count)) }
            .joined(separator: "\n")
        #expect(
            embedded.trimmingCharacters(in: .whitespacesAndNewlines)
                == text.trimmingCharacters(in: .whitespacesAndNewlines))
        try await ServerProcess.with(["--setup", example.path]) { server in
            #expect(await server.logged(timeout: 10) { $0.contains("setup applied") }, "\(server.log)")
            let export = try await server.client.get("/api/setup")
            #expect(export.json["threads"].items.count == 3)
        }
    }

    @Test(
        "while the setup is applied, /readyz and /api answer 503 not_ready and /healthz 200; SIGTERM stops it at once"
    )
    func notReadyWhileApplying() async throws {
        // A perform that waits a day on a thread that never runs holds the setup (the server is
        // stopped at the end, so the hold costs nothing). No shorter hold is safe: under
        // ThreadSanitizer a starved test process once took 4 minutes between two requests.
        let file = try Self.write([
            "threads": [
                [
                    "run": ["style": "manual"],
                    "performs": [["selector": "echo", "waitUntilDone": true, "timeout": 86_400]],
                ]
            ]
        ])
        defer { try? FileManager.default.removeItem(at: file) }
        guard let binary = E2EPaths.binary else { throw TestHTTPError("no runloopd binary") }
        // Returns once it accepts connections and its own log says so: the
        // setup is under way then. (Its --port-file is written only after
        // the setup, so the port is chosen here; another test's server may
        // take it first, and this one then fails to bind: a new port.)
        var started: ServerProcess?
        for _ in 0..<3 where started == nil {
            let port = freeLoopbackPort()
            started = try? ServerProcess.listening(
                executable: binary,
                arguments: [
                    "--port", "\(port)", "--setup", file.path, "--public-dir", "/nonexistent", "--max-wait", "86400",
                ],
                port: port, logged: "runloopd listening")
        }
        let server = try #require(started, "runloopd never listened on a port of its own")
        defer {
            // A stop signal ends it at once, mid-setup (the perform's day-long wait
            // is answered by the stop), not once the setup is over.
            server.send(signal: SIGTERM)
            #expect(server.waitForExit(timeout: ServerProcess.startTimeout) == 0, "\(server.log)")
            #expect(server.log.contains("runloopd stopped while applying --setup"), "\(server.log)")
            server.stop()
        }
        let c = E2EClient(port: server.port)
        // /api first, then /readyz: a 503 from /readyz means the setup was still
        // being applied when /api answered (no timing assumed).
        let threads = try await c.get("/api/threads")
        let ready = try await c.get("/readyz")
        #expect(try await c.get("/healthz").status == 200)
        guard ready.status == 503 else {
            Issue.record("the setup's one-day hold was over before the checks: \(ready.status)")
            return
        }
        #expect(threads.status == 503)
        #expect(threads["error", "code"] == "not_ready")
        #expect(threads["error", "message"] == "runloopd is applying its --setup")
    }
}
