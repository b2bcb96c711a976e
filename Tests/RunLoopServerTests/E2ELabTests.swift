import Foundation
import RunLoopCore
import RunLoopTestSupport
import Testing

@testable import RunLoopServer

/// The lab over HTTP: experiments served, the journal exported as an
/// experiment, and a recorded session replayed on a fresh server by the real
/// `runloopd play`.
@Suite("E2E lab: experiments, journal, record and replay")
struct E2ELabTests {
    /// Runs `runloopd play arguments…`; returns its exit status (-1 when it had to
    /// be killed after 2 minutes) and output.
    static func play(_ arguments: [String]) async throws -> (status: Int32, output: String) {
        let (status, output) = try await ServerProcess.runToExit(["play"] + arguments, timeout: 120)
        return (status ?? -1, output)
    }

    static func temporaryFile(_ name: String) -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("runloopd-lab-\(uniqueName())-\(name)")
    }

    static func uniqueName() -> String { "\(getpid())-\(UInt64.random(in: 0..<UInt64.max))" }

    @Test("GET /api/experiments lists the files of --experiments-dir; one reads whole; unknown is 404")
    func experimentsServed() async throws {
        let dir = E2EPaths.packageRoot.appendingPathComponent("experiments").path
        try await ServerProcess.with(["--experiments-dir", dir]) { server in
            let c = server.client
            let list = try await c.get("/api/experiments")
            #expect(list.status == 200)
            let items = list["experiments"].items
            #expect(items.count >= 16)
            for item in items {
                #expect(item["title"].string?.isEmpty == false)
                #expect(item["source", "article"].string?.isEmpty == false, "\(item["id"]) names its article")
                #expect((item["steps"].number ?? 0) >= 1)
            }
            let first = try #require(items.first?["id"].string)
            let whole = try await c.get("/api/experiments/\(first)")
            #expect(whole.status == 200)
            #expect(whole["steps"].items.first?["request", "path"].string?.hasPrefix("/api/") == true)
            #expect(try await c.get("/api/experiments/no-such-thing").status == 404)
        }
    }

    @Test("a recorded session replays on a fresh server with no difference; a changed outcome is reported")
    func recordAndReplay() async throws {
        let recording = Self.temporaryFile("session.json")
        defer { try? FileManager.default.removeItem(at: recording) }
        try await ServerProcess.with { server in
            let c = server.client
            // A session a learner might have: a manual thread, an afterDelay perform
            // that is a timer (timedOut, not handledSource), a source in two modes,
            // the keep-alive removed (finished), a cancelled delayed perform.
            let t = try await c.post("/api/threads", ["name": "lab", "run": ["style": "manual"]])
            let id = try #require(t["id"].string)
            let keepAlive = try #require(t["keepAliveSource"].string)
            _ = try await c.post("/api/threads/\(id)/perform", ["selector": "count", "afterDelay": 0])
            let run = try await c.post("/api/threads/\(id)/run", ["seconds": 0.2, "returnAfterSourceHandled": true])
            #expect(run["exitReason"] == "timedOut")
            let source = try await c.post("/api/threads/\(id)/sources", ["kind": "custom"])
            let sid = try #require(source["id"].string)
            #expect(try await c.post("/api/threads/\(id)/sources/\(sid)/modes", ["mode": "tracking"]).status == 200)
            _ = try await c.post("/api/threads/\(id)/sources/\(sid)/signal", ["wakeup": true])
            let tracked = try await c.post(
                "/api/threads/\(id)/run", ["mode": "tracking", "seconds": 5, "returnAfterSourceHandled": true])
            #expect(tracked["exitReason"] == "handledSource")
            _ = try await c.delete("/api/threads/\(id)/sources/\(sid)")
            #expect(try await c.delete("/api/threads/\(id)/sources/\(keepAlive)").status == 200)
            let finished = try await c.post("/api/threads/\(id)/run", ["seconds": 5])
            #expect(finished["exitReason"] == "finished")
            _ = try await c.post(
                "/api/threads/\(id)/perform", ["selector": "log", "args": ["message": "x"], "afterDelay": 9])
            let cancelled = try await c.delete(
                "/api/threads/\(id)/perform?selector=log&args=%7B%22message%22%3A%22x%22%7D")
            #expect(cancelled["cancelled"] == 1)
            _ = try await c.delete("/api/threads/\(id)")
            let journal = try await c.get("/api/journal")
            #expect(journal.status == 200)
            let steps = journal["steps"].items
            #expect(steps.count == 13)
            #expect(steps.first?["capture", id] == "id")
            #expect(steps[2]["request", "path"] == .string("/api/threads/${\(id)}/run"))
            #expect(steps[2]["expect", "json", "exitReason"] == "timedOut")
            // since= skips what an earlier export already had.
            let lastSeq = try #require(journal["lastSeq"].number)
            #expect(try await c.get("/api/journal?since=\(Int(lastSeq))")["steps"].items.isEmpty)
            #expect(try await c.get("/api/journal?since=99999999999999999999999")["steps"].items.isEmpty)
            #expect(try await c.get("/api/journal?since=-1").status == 400)
            try Data(journal.body).write(to: recording)
        }
        try await ServerProcess.with { fresh in
            // The fresh server has other ids: create a thread first.
            _ = try await fresh.client.post("/api/threads", [:])
            let replay = try await Self.play([recording.path, "--url", "http://127.0.0.1:\(fresh.port)", "--diff"])
            #expect(replay.status == 0, "\(replay.output)")
            #expect(!replay.output.contains("---"), "\(replay.output)")
            #expect(replay.output.contains("1 of 1 experiments passed"))
        }
        // A different outcome is a difference, reported step by step.
        var document = try JSON.parse(Array(try Data(contentsOf: recording)))
        guard case .object(var root) = document, case .array(var steps) = root["steps"],
            case .object(var step) = steps[2], case .object(var expect) = step["expect"]
        else { throw TestHTTPError("unexpected journal shape") }
        expect["json"] = ["exitReason": "handledSource"]
        step["expect"] = .object(expect)
        steps[2] = .object(step)
        root["steps"] = .array(steps)
        document = .object(root)
        try Data(JSON.serialize(document)).write(to: recording)
        let changed = try await Self.play([recording.path, "--diff"])
        #expect(changed.status == 1)
        #expect(changed.output.contains("step 3"), "\(changed.output)")
        #expect(changed.output.contains("-   exitReason: \"handledSource\""), "\(changed.output)")
        #expect(changed.output.contains("+   exitReason: \"timedOut\""), "\(changed.output)")
    }

    @Test("play reports a malformed experiment clearly and writes JUnit")
    func malformedAndJUnit() async throws {
        let bad = Self.temporaryFile("bad.json")
        defer { try? FileManager.default.removeItem(at: bad) }
        try Data(#"{"title": "x", "steps": [{"request": {"method": "PUT", "path": "/api"}}]}"#.utf8).write(to: bad)
        let result = try await Self.play([bad.path])
        #expect(result.status == 2)
        #expect(result.output.contains("step 1: request.method must be GET, POST or DELETE"), "\(result.output)")

        let good = Self.temporaryFile("good.json")
        let junit = Self.temporaryFile("junit.xml")
        defer {
            try? FileManager.default.removeItem(at: good)
            try? FileManager.default.removeItem(at: junit)
        }
        try Data(
            #"{"title": "version", "steps": [{"request": {"path": "/api/version"}, "expect": {"status": 200, "json": {"version": {"$exists": true}}}}]}"#
                .utf8
        ).write(to: good)
        let played = try await Self.play([good.path, "--junit", junit.path])
        #expect(played.status == 0, "\(played.output)")
        let xml = String(decoding: try Data(contentsOf: junit), as: UTF8.self)
        #expect(xml.contains("<testsuite name=\"runloopd-lab-"))
        #expect(xml.contains("failures=\"0\""))
    }

    /// A two-step experiment whose second step requests `path`.
    static func experiment(path: String) -> Value {
        [
            "title": "paths",
            "steps": [["request": ["path": "/api/version"]], ["request": ["method": "POST", "path": .string(path)]]],
        ]
    }

    @Test(
        "a step's request.path must be an API path: another host, a scheme, a backslash, outside /api/, hidden characters",
        arguments: [
            "//evil.example/x", "/healthz", "http://x/api/", "https://evil.example/api/threads", "api/threads", "/api",
            "", "/\\evil.example/api/threads", "/api/../x", "/api/threads/../../healthz", "/api/%2e%2E/healthz",
            "/api/./threads", "/api/threads/.", "/api/threads\r\nHost: evil.example", "/api/threads/\u{202E}1t",
            "/api/threads/a b", "/api/threads/\u{FEFF}", "/api\\threads",
        ])
    func requestPathMustBeAnAPIPath(path: String) throws {
        let error = #expect(throws: RunLoopError.self) {
            try Experiment(Self.experiment(path: path), fallbackId: "paths")
        }
        let message = try #require(error?.message)
        #expect(message.hasPrefix("step 2: request.path \""), "\(message)")
        #expect(message.contains("is not an API path: it must"), "\(message)")
        // The message shows the path with its hidden characters escaped, never as themselves.
        #expect(!message.unicodeScalars.contains { $0 == "\r" || $0 == "\u{202E}" || $0 == "\u{FEFF}" }, "\(message)")
        #expect(Experiment.apiPathProblem(path) != nil)
    }

    @Test(
        "API paths load: ids, variables, queries, percent-escapes, dots inside a segment",
        arguments: [
            "/api/threads", "/api/threads/${t}/run", "/api/threads/${t}/perform?selector=log&args=%7B%22a%22%3A1%7D",
            "/api/", "/api/threads/a..b", "/api/threads/...", "/api/history?thread=t1&since=15m#top",
            "/api/x?next=../..",
        ])
    func apiPathsLoad(path: String) throws {
        #expect(Experiment.apiPathProblem(path) == nil)
        let experiment = try Experiment(Self.experiment(path: path), fallbackId: "paths")
        #expect(experiment.steps[1].path == path)
    }

    @Test("every file of experiments/ holds API paths only")
    func shippedExperimentsLoad() throws {
        let dir = E2EPaths.packageRoot.appendingPathComponent("experiments").path
        let loaded = try ExperimentFiles.load(dir)
        #expect(loaded.count >= 16)
        for (file, experiment) in loaded {
            for step in experiment.steps {
                #expect(Experiment.apiPathProblem(step.path) == nil, "\(file): \(step.path)")
            }
        }
    }

    @Test("the journal's export leaves out requests whose path is not an API path, so it always loads")
    func journalExportLoads() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            #expect(try await c.post("/api/x/../threads", [:]).status == 404)
            #expect(try await c.post("/api/threads/%2e%2e/threads", [:]).status == 404)
            #expect(try await c.post("/api/threads", [:]).status == 201)
            let journal = try await c.get("/api/journal")
            #expect(journal["steps"].items.map { $0["request", "path"] } == ["/api/threads"])
            let experiment = try Experiment(journal.json, fallbackId: "journal")
            #expect(experiment.steps.count == 1)
        }
    }

    @Test("play sends no step whose path a captured value turned into a non-API path")
    func capturedValueCannotLeaveTheAPI() async throws {
        let file = Self.temporaryFile("captured-path.json")
        defer { try? FileManager.default.removeItem(at: file) }
        let document: Value = [
            "title": "a name that climbs out of /api/",
            "steps": [
                [
                    "request": ["method": "POST", "path": "/api/threads", "body": ["name": "../../healthz"]],
                    "capture": ["t": "id", "up": "name"], "expect": ["status": 201],
                ],
                ["request": ["path": "/api/threads/${up}"], "expect": ["status": 200]],
                ["request": ["method": "DELETE", "path": "/api/threads/${t}"], "expect": ["status": 200]],
            ],
        ]
        try Data(JSON.serialize(document)).write(to: file)
        let played = try await Self.play([file.path])
        #expect(played.status == 1, "\(played.output)")
        #expect(
            played.output.contains(
                #"not sent: "/api/threads/../../healthz" is not an API path: it must not hold a . or .. segment"#),
            "\(played.output)")
        // The other steps were played as usual: only step 2 failed.
        #expect(played.output.contains("✓ 1. POST /api/threads"), "\(played.output)")
        #expect(played.output.contains("✗ 2. GET \"/api/threads/../../healthz\" → 0"), "\(played.output)")
        #expect(played.output.contains("✓ 3. DELETE /api/threads/"), "\(played.output)")
    }

    @Test("modes per item, cancel by args, perform status and run-style errors over HTTP")
    func lessonsOverHTTP() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let bad = try await c.post("/api/threads", ["run": ["style": "runUntilDate"]])
            #expect(bad.status == 400)
            #expect(bad["error", "field"] == "run.seconds")
            let wrongMode = try await c.post("/api/threads", ["run": ["style": "run", "mode": "tracking"]])
            #expect(wrongMode["error", "field"] == "run.mode")
            let t = try await c.post("/api/threads", ["run": ["style": "manual"]])
            let id = try #require(t["id"].string)
            #expect(t["run", "distantFuture"] == true)
            let timer = try await c.post("/api/threads/\(id)/timers", ["interval": 1])
            let tm = try #require(timer["id"].string)
            let added = try await c.post("/api/threads/\(id)/timers/\(tm)/modes", ["mode": "tracking"])
            #expect(added["modes"] == ["default", "tracking"])
            let removed = try await c.delete("/api/threads/\(id)/timers/\(tm)/modes/default")
            #expect(removed["modes"] == ["tracking"])
            #expect(try await c.delete("/api/threads/\(id)/timers/\(tm)/modes/default").status == 409)
            let listed = try await c.get("/api/threads/\(id)/timers")
            #expect(listed["timers"].items.count == 1)
            let delayed = try await c.post("/api/threads/\(id)/perform", ["selector": "echo", "afterDelay": 30])
            #expect(delayed["modes"] == ["default"])
            #expect(delayed["state"] == "delayed")
            let pid = try #require(delayed["performId"].string)
            let timers = try await c.get("/api/threads/\(id)/timers")["timers"].items
            #expect(timers.contains { $0["id"] == .string(pid) && $0["role"] == "performDelay" })
            let badArgs = try await c.delete("/api/threads/\(id)/perform?selector=echo&args=notjson")
            #expect(badArgs.status == 400)
            let cancel = try await c.delete("/api/threads/\(id)/perform?selector=echo")
            #expect(cancel["ids"] == .array([.string(pid)]))
            let status = try await c.get("/api/threads/\(id)/performs/\(pid)")
            #expect(status["state"] == "cancelled")
            #expect(status["error", "code"] == "cancelled")
        }
    }
}
