import Foundation
import RunLoopCore
import RunLoopServer
import RunLoopTestSupport
import Testing

/// Predict, then run, over HTTP against the real binary: what
/// `POST /predict` says a run returns is what `POST /run` then returns
/// (exit reason, cause code and details, time), and `/predict` answers the
/// errors `/run` would.
@Suite("E2E predict: POST /predict, then POST /run")
struct E2EPredictTests {
    /// The cause without its sentence (the details are compared exactly).
    static func details(_ cause: Value) -> Value {
        guard case .object(var fields) = cause else { return cause }
        fields["message"] = nil
        return .object(fields)
    }

    /// Predicts `body` on `thread`, runs it, and checks they agree. The
    /// prediction counts from the moment the server read the loop, somewhere
    /// between sending `/predict` and its answer; the run's end is compared
    /// as an instant (its `at`), so the round trips in between do not count.
    ///
    /// The end may come later than predicted by as long as the server was
    /// kept from a CPU (a loaded machine, or ThreadSanitizer's slowed
    /// server): the loop thread's own CPU time during the run (callouts it
    /// spent that long in), the longest any server thread waited runnable
    /// for a CPU (the loop, or the dispatch thread that delivers CF's
    /// timeout), and the time the host stole. Linux counts all three, so a
    /// prediction that is late by more is wrong, not unlucky.
    static func predictThenRun(
        _ server: ServerProcess, _ thread: String, named name: String, _ body: Value
    ) async throws {
        let c = server.client
        let before = SchedStat.threads(of: server.pid)
        let stolenBefore = SchedStat.stolenMs()
        let sent = Date()
        let predicted = try await c.post("/api/threads/\(thread)/predict", body)
        let answered = Date()
        #expect(predicted.status == 200, "\(predicted)")
        #expect(predicted["prediction", "certain"] == true)
        let run = try await c.post("/api/threads/\(thread)/run", body, timeout: (body["seconds"].number ?? 0) + 30)
        let after = SchedStat.threads(of: server.pid)
        let stolenMs = max(0, SchedStat.stolenMs() - stolenBefore)
        #expect(run.status == 200, "\(run)")
        #expect(predicted["prediction", "exitReason"] == run["exitReason"], "\(predicted) vs \(run)")
        #expect(details(predicted["prediction", "cause"]) == details(run["cause"]), "\(predicted) vs \(run)")
        let atMs = try #require(predicted["prediction", "atMs"].number)
        let ended = try #require(run["at"].string.flatMap(Timestamp.parse))
        let durationMs = try #require(run["durationMs"].number)
        let loop = after.filter { $0.value.name == name }
        try #require(loop.count == 1, "one server thread named \(name): \(after.values.map(\.name))")
        let (tid, now) = loop.first!
        let busyMs = now.times.cpuMs - (before[tid]?.times.cpuMs ?? 0)
        let waitedMs =
            after.map { tid, thread in thread.times.waitMs - (before[tid]?.times.waitMs ?? 0) }.max() ?? 0
        let keptMs = busyMs + waitedMs + stolenMs
        // Timers count from the read, the deadline from the run's start: the
        // end falls between the read plus atMs and the run's start plus atMs
        // (within 25 ms, and the time the server was kept from a CPU).
        let started = ended.addingTimeInterval(-durationMs / 1000)
        let early = sent.addingTimeInterval(atMs / 1000 - 0.025)
        let late = max(answered, started).addingTimeInterval((atMs + 25 + keptMs) / 1000)
        #expect(
            ended >= early && ended <= late,
            """
            predicted \(atMs) ms after the read, ended \(ended) (\(sent)…\(answered)); \
            kept from a CPU \(keptMs) ms (loop busy \(busyMs), waited \(waitedMs), stolen \(stolenMs))
            """
        )
    }

    @Test("a predict changes nothing: the journal keeps the run, not the predict")
    func predictIsNotJournaled() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let thread = try await c.manualThread()
            let predicted = try await c.post("/api/threads/\(thread)/predict", ["seconds": 0.05])
            #expect(predicted.status == 200, "\(predicted)")
            #expect(try await c.post("/api/threads/\(thread)/run", ["seconds": 0.05]).status == 200)
            let paths = try await c.get("/api/journal")["steps"].items.map { $0["request", "path"] }
            #expect(paths.contains(.string("/api/threads/${\(thread)}/run")), "\(paths)")
            #expect(!paths.contains { $0.string?.hasSuffix("/predict") == true }, "\(paths)")
        }
    }

    @Test("timers, sources, a port and a cancelled delayed perform: each prediction is what the run returns")
    func predictionsMatchRuns() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            // Each loop thread is named, so its schedstat can be found.
            func manual(_ name: String, keepAlive: String = "port") async throws -> String {
                try await c.createThread([
                    "name": .string(name), "keepAlive": .string(keepAlive), "run": ["style": "manual"],
                ])
            }
            // A one-shot timer in an otherwise empty mode: finished when it fires.
            let t1 = try await manual("predict-one", keepAlive: "none")
            _ = try await c.post("/api/threads/\(t1)/timers", ["interval": 1, "repeats": false])
            try await Self.predictThenRun(server, t1, named: "predict-one", ["seconds": 3])
            // Only the keep-alive port: the deadline, no timer fire.
            let t2 = try await manual("predict-two")
            try await Self.predictThenRun(
                server, t2, named: "predict-two", ["seconds": 0.2, "returnAfterSourceHandled": true])
            // A signalled source and a queued message: both handled in the first pass.
            let t3 = try await manual("predict-three")
            let custom = try await c.post("/api/threads/\(t3)/sources", ["kind": "custom", "order": 1])
            let port = try await c.post("/api/threads/\(t3)/sources", ["kind": "port", "order": 2])
            let s = try #require(custom["id"].string)
            let p = try #require(port["id"].string)
            _ = try await c.post("/api/threads/\(t3)/sources/\(p)/messages", ["msgid": 1, "data": "x"])
            _ = try await c.post("/api/threads/\(t3)/sources/\(s)/signal", ["wakeup": false])
            try await Self.predictThenRun(
                server, t3, named: "predict-three", ["seconds": 2, "returnAfterSourceHandled": true])
            // A cancelled delayed perform leaves the mode's timerfd armed: the
            // loop wakes once with nothing to run (a custom source keeps the
            // mode from being empty, so the run times out).
            let t4 = try await manual("predict-four", keepAlive: "none")
            let queued = try await c.post(
                "/api/threads/\(t4)/perform", ["selector": "log", "args": ["message": "later"], "afterDelay": 0.15])
            #expect(queued.status == 202 || queued.status == 200, "\(queued)")
            let cancel = try await c.delete("/api/threads/\(t4)/perform?selector=log")
            #expect(cancel.status == 200, "\(cancel)")
            _ = try await c.post("/api/threads/\(t4)/sources", ["kind": "custom"])
            try await Self.predictThenRun(server, t4, named: "predict-four", ["seconds": 0.5])
            let woken = try await c.get("/api/threads/\(t4)/turns?wokeBy=wakeup")
            #expect(woken["turns"].items.count == 1, "\(woken)")
            // A one-shot timer whose fire runs the loop nested in tracking
            // (empty there: it finishes at entry), then the outer run times
            // out: the nested run is in the prediction's `nested` list.
            let t5 = try await manual("predict-five")
            _ = try await c.post(
                "/api/threads/\(t5)/timers",
                [
                    "interval": 0.1, "repeats": false,
                    "action": ["selector": "runNested", "args": ["mode": "tracking", "seconds": 0.1]],
                ])
            let predicted = try await c.post("/api/threads/\(t5)/predict", ["seconds": 0.3])
            let runs = predicted["prediction", "nested"].items
            #expect(runs.count == 1, "\(predicted)")
            #expect(runs.first?["mode"] == "tracking", "\(predicted)")
            #expect(runs.first?["exitReason"] == "finished", "\(predicted)")
            #expect(runs.first?["cause", "code"] == "mode_missing", "\(predicted)")
            try await Self.predictThenRun(server, t5, named: "predict-five", ["seconds": 0.3])
        }
    }

    @Test("predict answers the errors run would, and a loop thread's own style")
    func errorsAndOwnStyle() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.manualThread()
            #expect(try await c.post("/api/threads/t999/predict", ["seconds": 1]).status == 404)
            let missing = try await c.post("/api/threads/\(t)/predict", [:])
            #expect(missing.status == 400)
            #expect(missing["error", "field"] == "seconds")
            let common = try await c.post("/api/threads/\(t)/predict", ["seconds": 1, "mode": "common"])
            #expect(common.status == 400)
            #expect(try await c.post("/api/threads/\(t)/predict", ["seconds": 1, "bogus": 1]).status == 400)
            let loop = try await c.createThread(["name": "looper"])
            let own = try await c.post("/api/threads/\(loop)/predict", [:])
            #expect(own.status == 200, "\(own)")
            #expect(own["style"] == "loop")
            // A loop thread's own run ignores mode and seconds, but checks them as run would.
            let loopCommon = try await c.post("/api/threads/\(loop)/predict", ["mode": "common"])
            #expect(loopCommon.status == 400, "\(loopCommon)")
            #expect(loopCommon["error", "field"] == "mode")
            // Only its keep-alive port: the run does not return by itself.
            #expect(own["prediction", "exitReason"] == .null)
            let why = try await c.get("/api/threads/\(t)/why")
            #expect(why["modes"].items.first?["prediction", "exitReason"] == .null)
            _ = try await c.delete("/api/threads/\(t)")
            #expect(try await c.post("/api/threads/\(t)/predict", ["seconds": 1]).status == 409)
        }
    }
}
