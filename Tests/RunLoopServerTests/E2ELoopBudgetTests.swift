import Foundation
import RunLoopCore
import RunLoopTestSupport
import Testing

@testable import RunLoopServer

/// The loop budgets over HTTP (issue 37) and the held routes' deadlines,
/// against the real binary. A deadline is a bound the API promises, so it is
/// checked with a margin for a loaded machine; the margin stays far below
/// what the request would be held for without the deadline (the handler's
/// sleep, the perform's afterDelay), so a route that ignores its deadline
/// still fails.
@Suite("E2E loop budgets", .serialized)
struct E2ELoopBudgetTests {
    /// Scheduling slack on a loaded 2-core machine. Answers are timed on the
    /// thread that sent them (`timedSend`), so the slack covers the server
    /// and the kernel, not a test process whose pool other suites keep busy.
    static let margin = 3.0

    @Test("a runNested perform past --max-nesting is 429 nesting_limit and not queued; DELETE unwinds the nest")
    func nestingOverHTTP() async throws {
        try await ServerProcess.with(["--max-nesting", "8"]) { server in
            let client = server.client
            let thread = try await client.createThread()
            let body: Value = ["selector": "runNested", "args": ["seconds": 60], "modes": ["common"]]
            var refused: TestHTTPResponse?
            for depth in 2...20 {
                let response = try await client.post("/api/threads/\(thread)/perform", body)
                if response.status == 429 {
                    refused = response
                    break
                }
                #expect(response.status == 202, "\(response)")
                _ = try await client.poll("/api/threads/\(thread)") { $0["depth"].number == Double(depth) }
            }
            let refusal = try #require(refused, "never refused")
            #expect(refusal["error", "code"] == "nesting_limit", "\(refusal)")
            #expect(refusal.header("Retry-After") != nil)
            let info = try await client.get("/api/threads/\(thread)")
            #expect(info["depth"].number == 8 && info["counts", "pendingPerforms"].number == 0, "\(info)")
            let metrics = try await client.get("/metrics").text
            #expect(metrics.contains(#"runloopd_nesting_depth{stat="limit"} 8"#))
            #expect(metrics.contains(#"runloopd_nesting_depth{stat="max"} 8"#))
            #expect(metrics.contains(#"runloopd_nested_runs_refused_total{reason="depth"} 1"#), "\(metrics)")
            let (ended, seconds) = try await client.timedSend("DELETE", "/api/threads/\(thread)")
            #expect(ended.status == 200, "\(ended)")
            #expect(seconds < 15, "the end took \(seconds) s")
        }
    }

    /// Every operation openapi.json marks as held (`x-runloopd-deadline`) or
    /// able to answer 504: the cases below must cover exactly these.
    static var heldOperations: Set<String> {
        var held = Set<String>()
        for (path, item) in OpenAPIDocument.embedded["paths"].object ?? [:] {
            for (method, operation) in item.object ?? [:] where method != "parameters" {
                if operation["x-runloopd-deadline"] != .null || operation["responses", "504"] != .null {
                    held.insert("\(method.uppercased()) \(path)")
                }
            }
        }
        return held
    }

    @Test("every held route answers by its deadline (x-runloopd-deadline), even when its loop never lets go")
    func everyHeldRouteAnswersByItsDeadline() async throws {
        var covered = Set<String>()
        // The perform's wait, with the default --max-wait (300 s): without
        // the deadline the afterDelay case would hold the request for 101 s.
        try await ServerProcess.with { server in
            let client = server.client
            // Perform, waitUntilDone with afterDelay: 202 at timeout (issue 37, finding 6).
            let looping = try await client.createThread()
            let (delayed, delayedSeconds) = try await client.timedPost(
                "/api/threads/\(looping)/perform",
                ["selector": "count", "afterDelay": 100, "waitUntilDone": true, "timeout": 1])
            #expect(delayed.status == 202 && delayed["state"] == "delayed", "\(delayed)")
            #expect(delayedSeconds < 1 + Self.margin, "answered after \(delayedSeconds) s, timeout 1 s")
            // Perform, waitUntilDone on a loop that never runs it: 202 at timeout.
            let manual = try await client.manualThread()
            let (pending, pendingSeconds) = try await client.timedPost(
                "/api/threads/\(manual)/perform", ["selector": "count", "waitUntilDone": true, "timeout": 1])
            #expect(pending.status == 202 && pending["state"] == "pending", "\(pending)")
            #expect(pendingSeconds < 1 + Self.margin, "answered after \(pendingSeconds) s, timeout 1 s")
            covered.insert("POST /api/threads/{id}/perform")
        }
        // --max-wait 2: the stop wait and the end wait become 2 s too.
        let wait = 2.0
        try await ServerProcess.with(["--max-wait", "2"]) { server in
            let client = server.client
            // A manual thread whose one timer's handler holds the loop for 10 s.
            let held = try await client.manualThread()
            let timer = try await client.post(
                "/api/threads/\(held)/timers",
                ["interval": 0.01, "maxFires": 1, "action": ["selector": "sleep", "args": ["ms": 10_000]]])
            #expect(timer.status == 201, "\(timer)")
            // The run, the stall wait, the stop and the DELETE on threads of their
            // own: the last three must land while the handler still sleeps, which
            // a test resumed late by the cooperative pool (shared with every
            // suite of the parallel run) could miss. Each answer is timed on the
            // thread that sent it.
            let ran = Monitor<(TestHTTPResponse, Double)?>(nil)
            Thread.detachNewThread {
                let answer = try? client.timedBlocking(
                    "POST", "/api/threads/\(held)/run", body: JSON.serialize(["seconds": 0.2]),
                    contentType: "application/json", timeout: 30)
                ran.update { $0 = answer }
            }
            let ((stop, stopSeconds), (end, endSeconds)) = try await offThePool {
                // The handler is under way once the stall watchdog sees it (100 ms).
                _ = try client.pollBlocking("/api/warnings?thread=\(held)&code=stall&active=true") {
                    !$0["warnings"].items.isEmpty
                }
                let stop = try client.timedBlocking("POST", "/api/threads/\(held)/stop")
                let end = try client.timedBlocking("DELETE", "/api/threads/\(held)")
                return (stop, end)
            }
            #expect(stop.status == 504 && stop["error", "code"] == "deadline_exceeded", "\(stop)")
            #expect(stopSeconds < wait + Self.margin, "stop answered after \(stopSeconds) s")
            covered.insert("POST /api/threads/{id}/stop")
            #expect(await offThePool { ran.wait(timeout: 30) { $0 != nil } }, "the run was never answered")
            let (answer, runSeconds) = try #require(ran.value)
            #expect(answer.status == 504 && answer["error", "code"] == "deadline_exceeded", "\(answer)")
            #expect(runSeconds < 0.2 + wait + Self.margin, "run answered after \(runSeconds) s")
            covered.insert("POST /api/threads/{id}/run")
            #expect(end.status == 504 && end["error", "code"] == "deadline_exceeded", "\(end)")
            #expect(endSeconds < wait + Self.margin, "end answered after \(endSeconds) s")
            covered.insert("DELETE /api/threads/{id}")

            #expect(covered == Self.heldOperations, "held routes without a deadline case: \(Self.heldOperations)")
        }
    }

    @Test("a livelocked thread's run keeps its deadline, is reported, and its DELETE ends it at once")
    func livelockOverHTTP() async throws {
        try await ServerProcess.with(["--max-nest-cpu", "0.3", "--max-nesting", "1024"]) { server in
            let client = server.client
            let thread = try await client.manualThread()
            for n in 0..<40 {
                let timer = try await client.post(
                    "/api/threads/\(thread)/timers",
                    [
                        "interval": .number(0.0001 + Double(n) * 0.000004),
                        "action": ["selector": "runNested", "args": ["seconds": 0.001]],
                    ])
                #expect(timer.status == 201, "\(timer)")
            }
            let (ran, runSeconds) = try await client.timedPost(
                "/api/threads/\(thread)/run", ["seconds": 1], timeout: 30)
            #expect(ran.status == 200 && ran["exitReason"] == "timedOut", "\(ran)")
            // The run's bound: its seconds plus the stop wait (10 s).
            #expect(runSeconds < 1 + 10, "run answered after \(runSeconds) s")
            let warnings = try await client.get("/api/warnings?thread=\(thread)&code=livelock")
            #expect(!warnings["warnings"].items.isEmpty, "\(warnings)")
            let metrics = try await client.get("/metrics").text
            #expect(!metrics.contains("runloopd_livelocks_total 0\n"), "no livelock counted")
            // Run again, and end it while it runs.
            async let again = client.post("/api/threads/\(thread)/run", ["seconds": 30], timeout: 60)
            _ = try await client.poll("/api/threads/\(thread)") { ($0["depth"].number ?? 0) >= 1 }
            let (end, endSeconds) = try await client.timedSend("DELETE", "/api/threads/\(thread)")
            #expect(end.status == 200, "\(end)")
            #expect(endSeconds < 15, "the end took \(endSeconds) s")
            let stopped = try await again
            #expect(stopped.status == 200 && stopped["exitReason"] == "stopped", "\(stopped)")
        }
    }
}
