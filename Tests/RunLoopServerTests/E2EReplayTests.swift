import Foundation
import RunLoopCore
import RunLoopTestSupport
import Testing

@testable import RunLoopServer

/// Record and replay for a real session: a learner-style session of more than
/// 100 state-changing requests (blocking runs in the background and the stops
/// sent while they run, timers, sources, performs, spaced batches of idle
/// tasks) recorded on one real server and replayed with the real
/// `runloopd play` on a fresh one.
@Suite("E2E replay: a learner's session, recorded and replayed")
struct E2EReplayTests {
    /// Both servers: a small task queue, so two batches sent back to back
    /// would be refused (429) where the session spaced them.
    static let flags = ["--max-tasks", "4"]

    /// One lesson on a manual thread of its own, plus a batch of tasks on the
    /// shared automatic thread `tasks`: 17 requests the journal keeps.
    static func lesson(_ n: Int, _ c: E2EClient, tasks: String) async throws {
        let t = try await c.post("/api/threads", ["name": .string("lesson\(n)"), "run": ["style": "manual"]])
        #expect(t.status == 201)
        let id = try #require(t["id"].string)
        let timer = try await c.post("/api/threads/\(id)/timers", ["interval": 0.05])
        #expect(timer.status == 201)
        let tm = try #require(timer["id"].string)
        let source = try await c.post("/api/threads/\(id)/sources", ["kind": "custom"])
        let sid = try #require(source["id"].string)
        #expect(try await c.post("/api/threads/\(id)/sources/\(sid)/modes", ["mode": "tracking"]).status == 200)
        #expect(try await c.post("/api/threads/\(id)/perform", ["selector": "count"]).status == 202)
        #expect(
            try await c.post("/api/threads/\(id)/observers", ["activities": ["beforeWaiting"]]).status == 201)
        // A blocking run in the background, and the stop sent while it runs.
        async let run = c.post("/api/threads/\(id)/run", ["seconds": 30], timeout: 40)
        try await c.waitUntilWaiting(id)
        let stop = try await c.post("/api/threads/\(id)/stop")
        #expect(stop["exitReason"] == "stopped")
        #expect(try await run["exitReason"] == "stopped")
        // A signalled source ends a returnAfterSourceHandled run in its mode.
        #expect(try await c.post("/api/threads/\(id)/sources/\(sid)/signal", ["wakeup": true]).status == 200)
        let tracked = try await c.post(
            "/api/threads/\(id)/run", ["mode": "tracking", "seconds": 5, "returnAfterSourceHandled": true])
        #expect(tracked["exitReason"] == "handledSource")
        // A batch that fills the queue; the next lesson's batch waits until it ran.
        for k in 0..<4 {
            let added = try await c.post(
                "/api/threads/\(tasks)/tasks", ["id": .string("l\(n)k\(k)"), "selector": "count"])
            #expect(added.status == 201, "\(added)")
        }
        _ = try await c.poll("/api/threads/\(tasks)/tasks") { $0["count"] == 0 }
        // A delayed perform, cancelled before its timer fires; the timer removed.
        let delayed = try await c.post(
            "/api/threads/\(id)/perform", ["selector": "log", "args": ["message": "later"], "afterDelay": 9])
        #expect(delayed["state"] == "delayed")
        #expect(try await c.delete("/api/threads/\(id)/perform?selector=log")["cancelled"] == 1)
        #expect(try await c.delete("/api/threads/\(id)/timers/\(tm)").status == 200)
    }

    @Test(
        "a learner's session of 100+ steps replays on a fresh server with no difference; --cleanup ends its threads"
    )
    func learnerSessionReplays() async throws {
        let recording = E2ELabTests.temporaryFile("learner.json")
        let changed = E2ELabTests.temporaryFile("learner-changed.json")
        defer {
            try? FileManager.default.removeItem(at: recording)
            try? FileManager.default.removeItem(at: changed)
        }
        let session = try await ServerProcess.with(Self.flags) { server in
            let c = server.client
            let tasks = try await c.createThread(["name": "tasks"])
            for n in 0..<6 { try await Self.lesson(n, c, tasks: tasks) }
            let journal = try await c.get("/api/journal")
            #expect(journal.status == 200)
            try Data(journal.body).write(to: recording)
            return journal.json
        }
        let steps = session["steps"].items
        #expect(steps.count == 1 + 6 * 17)
        let paths = steps.map { $0["request", "path"].string ?? "" }
        // Each background run comes before the stop that ended it, marked background.
        let runs = steps.indices.filter { steps[$0]["background"] == true }
        #expect(runs.count == 6, "\(paths)")
        for index in runs {
            #expect(paths[index].hasSuffix("/run"), "\(paths[index])")
            #expect(paths[index + 1].hasSuffix("/stop"), "\(paths[index + 1])")
            #expect(steps[index]["expect", "json", "exitReason"] == "stopped")
        }

        try await ServerProcess.with(Self.flags) { fresh in
            let c = fresh.client
            // The fresh server's ids differ from the recording's.
            let before = [try await c.createThread(), try await c.createThread()]
            let replay = try await E2ELabTests.play([
                recording.path, "--url", "http://127.0.0.1:\(fresh.port)", "--diff", "--cleanup",
            ])
            #expect(replay.status == 0, "\(replay.output)")
            #expect(!replay.output.contains("---"), "\(replay.output)")
            #expect(replay.output.contains("1 of 1 experiments passed"), "\(replay.output)")
            // --cleanup: only the threads made before the replay still run.
            let threads = try await c.get("/api/threads")["threads"].items
            let alive = threads.filter { $0["state"] != "exited" }.compactMap { $0["id"].string }
            #expect(Set(alive) == Set(before), "\(threads.map { "\($0["id"]) \($0["state"])" })")
            #expect(threads.count == 2 + 7, "the replay made the session's 7 threads")

            // A changed outcome: the diff names the recording's ids and what they were here.
            guard case .object(var root) = session, case .array(var list) = root["steps"],
                let index = runs.first, case .object(var step) = list[index], case .object(var expect) = step["expect"]
            else { throw TestHTTPError("unexpected journal shape") }
            expect["json"] = ["exitReason": "timedOut"]
            step["expect"] = .object(expect)
            list[index] = .object(step)
            root["steps"] = .array(list)
            try Data(JSON.serialize(.object(root))).write(to: changed)
            let different = try await E2ELabTests.play([
                changed.path, "--url", "http://127.0.0.1:\(fresh.port)", "--diff", "--cleanup",
            ])
            #expect(different.status == 1, "\(different.output)")
            let recordedId = try #require(paths[index].split(separator: "/").dropFirst(2).first)
            let name = String(recordedId).replacingOccurrences(of: "${", with: "").replacingOccurrences(
                of: "}", with: "")
            let line = different.output.split(separator: "\n").first { $0.hasPrefix("--- ") } ?? ""
            #expect(line.hasPrefix("--- recorded-session step \(index + 1): POST /api/threads/\(name)/run"), "\(line)")
            #expect(line.contains("[\(name) → t"), "\(line)")
            #expect(!line.contains("[\(name) → \(name)]"), "the replay's id differs: \(line)")
            #expect(different.output.contains("-   exitReason: \"timedOut\""), "\(different.output)")
            #expect(different.output.contains("+   exitReason: \"stopped\""), "\(different.output)")
        }
    }

    @Test("play against an unreachable server, or one that wants a token: exit 2 and one message")
    func unreachable() async throws {
        let file = E2ELabTests.temporaryFile("unreachable.json")
        defer { try? FileManager.default.removeItem(at: file) }
        let document: Value = [
            "title": "three steps",
            "steps": [
                ["request": ["method": "POST", "path": "/api/threads"], "capture": ["t": "id"]],
                ["request": ["method": "POST", "path": "/api/threads/${t}/wakeup"]],
                ["request": ["method": "DELETE", "path": "/api/threads/${t}"]],
            ],
        ]
        try Data(JSON.serialize(document)).write(to: file)
        let played = try await E2ELabTests.play([file.path, "--url", "http://127.0.0.1:1"])
        #expect(played.status == 2, "\(played.output)")
        let lines = played.output.split(separator: "\n")
        #expect(lines.count == 1, "\(played.output)")
        #expect(lines.first?.hasPrefix("runloopd play: cannot reach http://127.0.0.1:1") == true, "\(played.output)")
        // A server that wants a token: one message too, before any step.
        try await ServerProcess.with(["--token", "replay-token-0123456789"]) { server in
            let url = "http://127.0.0.1:\(server.port)"
            let refused = try await E2ELabTests.play([file.path, "--url", url])
            #expect(refused.status == 2, "\(refused.output)")
            #expect(refused.output == "runloopd play: \(url) wants a token: give --token or RUNLOOPD_TOKEN\n")
        }
    }

    @Test("the export orders steps by arrival, turns gaps into bounded waits and marks what overlapped the next")
    func exportKeepsTimeAndConcurrency() throws {
        let t0 = Date(timeIntervalSince1970: 1_800_000_000)
        func entry(_ seq: Int, _ path: String, arrived: Double, answered: Double, _ answer: String = "{}")
            -> Journal.Entry
        {
            Journal.Entry(
                seq: seq, started: t0 + arrived, at: t0 + answered, method: "POST", path: path, body: [],
                status: 200, answer: Array(answer.utf8))
        }
        // As answered: the stop (seq 2) before the run it stopped (seq 3).
        let entries = [
            entry(1, "/api/threads", arrived: 0, answered: 0.001, #"{"id":"t2"}"#),
            entry(2, "/api/threads/t2/stop", arrived: 0.5, answered: 0.88, #"{"exitReason":"stopped"}"#),
            entry(3, "/api/threads/t2/run", arrived: 0.1, answered: 0.9, #"{"exitReason":"stopped"}"#),
            entry(4, "/api/threads/t2/tasks", arrived: 0.902, answered: 0.903),
            entry(5, "/api/threads/t2/tasks", arrived: 20, answered: 20.001),
            entry(6, "/api/threads/t2/tasks", arrived: 20.002, answered: 20.003),
        ]
        let steps = Journal.experiment(entries, version: "test", maxWait: 5, newestSeq: 9)["steps"].items
        #expect(
            steps.map { $0["request", "path"].string ?? "" } == [
                "/api/threads", "/api/threads/${t2}/run", "/api/threads/${t2}/stop", "/api/threads/${t2}/tasks",
                "/api/threads/${t2}/tasks", "/api/threads/${t2}/tasks",
            ])
        #expect(steps.map { $0["background"] } == [.null, true, .null, .null, .null, .null])
        // From the previous step's arrival; at most maxWait; none under 5 ms.
        #expect(steps.map { $0["wait"] } == [.null, 0.1, 0.4, 0.402, 5, .null])
        let bounded = Journal.experiment(entries, version: "test", maxWait: 1, newestSeq: 9)
        #expect(bounded["steps"].items[4]["wait"] == 1)
        #expect(bounded["lastSeq"] == 6)
        #expect(bounded["journalSeq"] == 9)
        // The export loads, and the player would see the same.
        let experiment = try Experiment(bounded, fallbackId: "journal")
        #expect(experiment.steps.map(\.background) == [false, true, false, false, false, false])
        #expect(experiment.steps.map(\.wait) == [nil, 0.1, 0.4, 0.402, 1, nil])
    }

    @Test("an exported step's wait and background are checked when a file is read")
    func waitAndBackgroundAreChecked() throws {
        func load(_ step: Value) throws(RunLoopError) -> Experiment {
            try Experiment(["title": "x", "steps": .array([step])], fallbackId: "x")
        }
        let fine = try load(["request": ["method": "POST", "path": "/api/threads"], "wait": 0.25, "background": true])
        #expect(fine.steps[0].wait == 0.25)
        #expect(fine.steps[0].background)
        for bad: Value in [
            ["request": ["path": "/api/threads"], "wait": -1], ["request": ["path": "/api/threads"], "wait": 61],
            ["request": ["path": "/api/threads"], "wait": "1"], ["request": ["path": "/api/threads"], "background": 1],
            ["request": ["path": "/api/threads"], "background": true, "until": ["timeout": 1]],
        ] {
            #expect(throws: RunLoopError.self, "\(bad)") { try load(bad) }
        }
    }
}
