import Foundation
import RunLoopCore
import RunLoopServer
import Testing
import RunLoopTestSupport

/// Warnings and stalls over HTTP against the real binary, thresholds shortened
/// by flags: each warning code made to appear (GET /api/warnings, the thread
/// object) and, where it can, to go away; the 400 ms stall; the metrics.
/// Nothing sleeps: every wait is a condition with a deadline.
@Suite("E2E explain: warnings, stalls, metrics")
struct E2EWarningTests {
    static let fast = [
        "--lost-wakeup-after", "0.2", "--idle-perform-after", "0.2", "--mode-never-runs-after", "0.3",
    ]

    @Test("lost_wakeup: a signal without a wake-up on a sleeping loop; a wake-up resolves it")
    func lostWakeup() async throws {
        try await ServerProcess.with(Self.fast) { server in
            let c = server.client
            let t = try await c.createThread(["run": ["seconds": 60]])
            let s = try #require(try await c.post("/api/threads/\(t)/sources", ["kind": "custom"])["id"].string)
            try await c.waitUntilWaiting(t)
            #expect(try await c.post("/api/threads/\(t)/sources/\(s)/signal", ["wakeup": false]).status == 200)
            let raised = try await c.warning(t, "lost_wakeup") { $0["active"] == true }
            #expect(raised["subjects"] == [.string(s)])
            #expect(raised["severity"] == "warning")
            #expect(raised["message"].string?.contains("CFRunLoopWakeUp") == true)
            let thread = try await c.get("/api/threads/\(t)")
            #expect(thread["warnings"].items.contains { $0["code"] == "lost_wakeup" })
            #expect(try await c.post("/api/threads/\(t)/wakeup").status == 200)
            _ = try await c.warning(t, "lost_wakeup") { $0["active"] == false }
        }
    }

    @Test("mode_never_runs: a timer in a mode the thread does not run; a run in it resolves it")
    func modeNeverRuns() async throws {
        try await ServerProcess.with(Self.fast) { server in
            let c = server.client
            // A manual thread nobody runs raises nothing (issue 39: /why says it runs only when asked).
            let quiet = try await c.manualThread()
            _ = try await c.post("/api/threads/\(quiet)/timers", ["interval": 0.05, "mode": "tracking"])
            let t = try await c.manualThread()
            let tm = try #require(
                try await c.post("/api/threads/\(t)/timers", ["interval": 0.05, "mode": "tracking"])["id"].string)
            // Running in default past the threshold: the timer's mode never runs.
            #expect(try await c.run(t, ["seconds": 0.8])["exitReason"] == "timedOut")
            let raised = try await c.warning(t, "mode_never_runs") { $0["active"] == true }
            // The quiet thread's check was due before t's (one queue, in deadline order): it raised nothing.
            let none = try await c.get("/api/warnings?thread=\(quiet)&code=mode_never_runs")
            #expect(none["warnings"].items.isEmpty, "\(none.json)")
            let why = try await c.get("/api/threads/\(quiet)/why")
            #expect(why["verdict"].string?.contains("manual and not running") == true)
            #expect(raised["subjects"] == [.string(tm)])
            #expect(raised["details", "mode"] == "tracking")
            let run = try await c.run(t, ["seconds": 0.2, "mode": "tracking"])
            #expect(run["exitReason"] == "timedOut")
            _ = try await c.warning(t, "mode_never_runs") { $0["active"] == false }
        }
    }

    @Test("perform_on_idle_loop: a perform on a manual thread that is not running; its run resolves it")
    func performOnIdleLoop() async throws {
        try await ServerProcess.with(Self.fast) { server in
            let c = server.client
            let t = try await c.manualThread()
            let queued = try await c.post("/api/threads/\(t)/perform", ["selector": "echo"])
            let p = try #require(queued["performId"].string)
            let raised = try await c.warning(t, "perform_on_idle_loop") { $0["active"] == true }
            #expect(raised["subjects"] == [.string(p)])
            #expect(raised["severity"] == "info")
            #expect(raised["message"].string?.contains("manual") == true)
            let run = try await c.run(t, ["seconds": 5, "returnAfterSourceHandled": true])
            #expect(run["cause", "perform"] == .string(p))
            _ = try await c.warning(t, "perform_on_idle_loop") { $0["active"] == false }
        }
    }

    @Test("loop_cannot_wake: forever with keepAlive none ends at birth")
    func foreverWithoutKeepAlive() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.createThread(["keepAlive": "none", "run": ["style": "forever"]])
            let raised = try await c.warning(t, "loop_cannot_wake") { _ in true }
            #expect(raised["severity"] == "warning")
            #expect(raised["message"].string?.contains("ends at birth") == true)
            let ended = try await c.poll("/api/threads/\(t)") { $0["state"] == "exited" }
            #expect(ended["lastExit", "cause", "code"] == "mode_missing")
        }
    }

    @Test("loop_cannot_wake: an hour-long run with only the keep-alive port; the stop resolves it")
    func longRunWithNothingToWake() async throws {
        try await ServerProcess.with(["--max-wait", "4000"]) { server in
            let c = server.client
            let t = try await c.manualThread()
            async let run = c.run(t, ["seconds": 3600])
            let raised = try await c.warning(t, "loop_cannot_wake") { $0["active"] == true }
            #expect(raised["severity"] == "info")
            #expect(raised["details", "mode"] == "default")
            try await c.waitUntilWaiting(t)
            #expect(try await c.post("/api/threads/\(t)/stop").status == 200)
            #expect(try await run["cause", "code"] == "stop_request")
            _ = try await c.warning(t, "loop_cannot_wake") { $0["active"] == false }
        }
    }

    @Test("timer_behind: a repeating timer held up past its interval; fires on time resolve it")
    func timerBehind() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.createThread()
            let tm = try #require(try await c.post("/api/threads/\(t)/timers", ["interval": 0.05])["id"].string)
            let slept = try await c.post(
                "/api/threads/\(t)/perform",
                ["selector": "sleep", "args": ["ms": 300], "waitUntilDone": true])
            #expect(slept["ok"] == true)
            let raised = try await c.warning(t, "timer_behind") { _ in true }
            #expect(raised["subjects"] == [.string(tm)])
            #expect((raised["details", "skipped"].integer ?? 0) >= 1)
            #expect(raised["message"].string?.contains("skipped") == true)
            _ = try await c.warning(t, "timer_behind") { $0["active"] == false }
        }
    }

    @Test("stall: a 400 ms selector is exactly one stall, micro then hang, then stall-ended")
    func stall() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.createThread()
            let stream = try EventStreamClient<Value>(port: server.port, path: "/api/events?thread=\(t)")
            defer { stream.disconnect() }
            #expect(stream.next(timeout: 20) { $0.name == "hello" } != nil)
            let slept = try await c.post(
                "/api/threads/\(t)/perform",
                ["selector": "sleep", "args": ["ms": 400], "waitUntilDone": true])
            let p = try #require(slept["performId"].string)
            let ended = try #require(stream.next(timeout: 20) { $0.name == "stall-ended" }?.data)
            let stalls = Self.payloads(stream, named: "stall")
            #expect(Set(stalls.map { $0["stall"] }).count == 1, "one stall id")
            #expect(stalls.first?["change"] == "began")
            #expect(stalls.first?["severity"] == "micro")
            #expect(stalls.last?["severity"] == "hang")
            #expect(ended["stall"] == stalls.first?["stall"])
            #expect(ended["severity"] == "hang")
            #expect((ended["ms"].number ?? 0) >= 400)
            #expect(ended["callout", "id"] == .string(p))
            #expect(ended["callout", "selector"] == "sleep")
            let warning = try await c.warning(t, "stall") { $0["active"] == false }
            #expect(warning["severity"] == "hang")
            #expect(warning["count"] == 1)
        }
    }

    @Test("busy_loop: utilisation over the threshold for a full window; it goes once the work stops")
    func busyLoop() async throws {
        try await ServerProcess.with(["--busy-window", "1"]) { server in
            let c = server.client
            let t = try await c.createThread()
            // Each fire holds the loop 80 ms (under the 100 ms micro stall)
            // on a 1 ms interval: CF moves a repeating timer's next fire to
            // the first one after the action returns, so a turn sleeps at
            // most 1 ms plus its wake-up latency, and the window stays near
            // 80/81 busy (over 0.9 while wake-ups average under 8 ms). The
            // set-up it replaces, 19 ms on 20 ms, had 1 ms of slack: a
            // wake-up 1 ms late skipped a fire, the loop then slept ~19 ms,
            // and under load the window fell under 0.9 (flaky).
            let timer = try await c.post(
                "/api/threads/\(t)/timers",
                ["interval": 0.001, "action": ["selector": "sleep", "args": ["ms": 80]]])
            let tm = try #require(timer["id"].string)
            let raised = try await c.warning(t, "busy_loop", timeout: 60) { $0["active"] == true }
            // Raised above the 0.9 threshold; the reported ratio is rounded to 3 decimals.
            #expect((raised["details", "utilization"].number ?? 0) >= 0.9)
            let thread = try await c.get("/api/threads/\(t)")
            #expect((thread["load", "utilization"].number ?? 0) > 0.5)
            #expect(try await c.delete("/api/threads/\(t)/timers/\(tm)").status == 200)
            _ = try await c.warning(t, "busy_loop", timeout: 60) { $0["active"] == false }
        }
    }

    @Test("metrics: wake-ups by cause, turn busy time, stalls by severity, active warnings, utilisation")
    func metrics() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.createThread()
            _ = try await c.post("/api/threads/\(t)/timers", ["interval": 0.02, "maxFires": 3])
            _ = try await c.poll("/api/threads/\(t)/timers") { $0["timers"].items.first?["fires"] == 3 }
            let slept = try await c.post(
                "/api/threads/\(t)/perform",
                ["selector": "sleep", "args": ["ms": 300], "waitUntilDone": true])
            #expect(slept["ok"] == true)
            let text = try await c.poll("/metrics", timeout: 20) {
                $0.text.contains(#"runloopd_stalls_total{severity="hang"} 1"#)
            }.text
            let timerWakeups = Self.sample(text, #"runloopd_wakeups_total{cause="timer"}"#)
            #expect((timerWakeups ?? 0) >= 3)
            #expect(text.contains("runloopd_turn_busy_seconds_bucket"))
            #expect(text.contains(#"runloopd_warnings_active{code="stall"} 0"#))
            #expect(Self.sample(text, #"runloopd_loop_utilization_ratio{stat="mean"}"#) != nil)
            #expect(Self.sample(text, #"runloopd_loop_utilization_ratio{stat="max"}"#) != nil)
        }
    }

    @Test("GET /api/warnings refuses a bad or empty filter with the field named; a big turns limit is the whole ring")
    func badFilters() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let code = try await c.get("/api/warnings?code=bogus")
            #expect(code.status == 400)
            #expect(code["error", "field"] == "code")
            let active = try await c.get("/api/warnings?active=maybe")
            #expect(active.status == 400)
            #expect(active["error", "field"] == "active")
            #expect(try await c.get("/api/warnings?code=")["error", "field"] == "code")
            #expect(try await c.get("/api/warnings?active=")["error", "field"] == "active")
            // A turns page larger than the ring is the whole ring, not an error.
            let t = try await c.createThread()
            let page = try await c.get("/api/threads/\(t)/turns?limit=100000")
            #expect(page.status == 200 && page["capacity"] == 256)
            let fine = try await c.get("/api/warnings?active=true&code=stall")
            #expect(fine.status == 200 && fine["warnings"].items.isEmpty)
        }
    }

    /// The data of every event named `name` so far, in order.
    static func payloads(_ stream: EventStreamClient<Value>, named name: String) -> [Value] {
        stream.state.value.events.filter { $0.name == name }.map(\.data)
    }

    /// The value of one sample line of the Prometheus text.
    static func sample(_ text: String, _ series: String) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix(series + " ") {
            return Double(line.dropFirst(series.count + 1))
        }
        return nil
    }
}

extension E2EClient {
    /// Waits until `thread` has a warning `code` matching `predicate`; returns it.
    func warning(
        _ thread: String, _ code: String, timeout: Double = 20, _ predicate: @escaping @Sendable (Value) -> Bool
    ) async throws -> Value {
        let page = try await poll("/api/warnings?thread=\(thread)&code=\(code)", timeout: timeout) {
            $0["warnings"].items.contains(where: predicate)
        }
        return try #require(page["warnings"].items.last(where: predicate))
    }
}
