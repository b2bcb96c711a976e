import CoreFoundation
import Foundation
import RunLoopTestSupport
import Testing

@testable import RunLoopCore

/// The loop budgets (issue 37): nesting depth, worker stacks, CPU in nested
/// runs, and an end that unwinds any nest. Every wait has a deadline; no
/// test asserts a speed, only that an answer comes before its bound.
@Suite("Loop budgets")
struct LoopBudgetTests {
    private func registry(maxNesting: Int = 128, nestCPU: Double = 2) -> (WorkerRegistry, Probe) {
        var limits = Limits()
        limits.maxNesting = maxNesting
        limits.maxNestCPUSeconds = nestCPU
        return makeRegistry(limits)
    }

    private func nested(_ seconds: Double) -> SelectorCall {
        SelectorCall(selector: "runNested", args: ["seconds": .number(seconds)])
    }

    @Test("a runNested past --max-nesting is refused before it starts, queued or not")
    func depthBudget() throws {
        let (registry, probe) = registry(maxNesting: 4)
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.loop))
        // One at a time, as requests come (a perform queued while another
        // runs waits for the routine that runs it to come round again).
        for depth in 2...4 {
            _ = try worker.performCall("runNested", ["seconds": .number(30)])
            try #require(probe.waitUntil { worker.snapshot.depth == depth }, "depth \(depth) never reached")
        }
        // The route's check: nothing is queued.
        #expect(throws: RunLoopError.self) { try worker.checkNestingAdmission() }
        do {
            try worker.checkNestingAdmission()
        } catch {
            #expect(error.code == "nesting_limit" && error.kind == .limit)
        }
        // Queued anyway (as a perform that passed the check earlier would be):
        // refused when it runs, the depth unchanged.
        let late = try worker.performCall("runNested", ["seconds": .number(30)])
        let result = try #require(late.result.wait(), "the perform was never answered")
        guard case .failure(let error) = result.outcome else {
            Issue.record("a nested run past the budget started")
            return
        }
        #expect(error.code == "nesting_limit")
        #expect(worker.snapshot.depth == 4 && worker.snapshot.depthMax == 4)
        #expect(registry.diagnostics.nestedRunsRefused["depth", default: 0] >= 2)
        #expect(!registry.diagnostics.warnings.list(thread: worker.id, code: .nestingLimit, active: true).isEmpty)
        // The end unwinds the nest at once.
        #expect(worker.endAndWait(timeout: 10) != nil, "the end did not unwind four nested runs")
    }

    @Test("a timer's runNested at the budget records an error on the timer, never a crash")
    func depthBudgetFromCallouts() throws {
        let (registry, _) = registry(maxNesting: 3)
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.manual))
        for _ in 0..<8 { _ = try worker.addTimer(TimerSpec(interval: 0.001, action: nested(0.05))) }
        let exit = try worker.runAndWait(seconds: 0.3)
        #expect(exit.reason == .timedOut)
        let snapshot = worker.snapshot
        #expect(snapshot.depthMax == 3, "depth reached \(snapshot.depthMax)")
        let errors = worker.timerSnapshots().compactMap(\.lastActionError)
        #expect(errors.contains { $0.contains("--max-nesting") }, "\(errors)")
    }

    @Test("worker stacks are sized for the depth budget, and a run measures what it uses")
    func stackSize() throws {
        let (registry, probe) = registry(maxNesting: 256)
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.loop))
        _ = try worker.performCall("runNested", ["seconds": .number(30)])
        #expect(probe.waitUntil { worker.snapshot.depth == 2 })
        let snapshot = worker.snapshot
        #expect(snapshot.stackBytes >= registry.limits.threadStackBytes, "stack \(snapshot.stackBytes)")
        #expect(snapshot.stackUsedBytes > 0 && snapshot.stackUsedBytes < snapshot.stackBytes)
    }

    @Test("a livelocked nest is reported, stopped and refused; the outer run keeps its deadline")
    func livelock() throws {
        let (registry, _) = registry(maxNesting: 1024, nestCPU: 0.2)
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.manual))
        for n in 0..<40 {
            _ = try worker.addTimer(TimerSpec(interval: 0.0001 + Double(n) * 0.000004, action: nested(0.001)))
        }
        // Without the budget this run would not come back (issue 37): every
        // timer's nested run fires the others' again.
        let exit = try worker.runAndWait(seconds: 1)
        #expect(exit.reason == .timedOut)
        #expect(registry.diagnostics.livelocksDetected >= 1)
        #expect(registry.diagnostics.nestedRunsRefused["livelock", default: 0] >= 1)
        let warnings = registry.diagnostics.warnings.list(thread: worker.id, code: .livelock)
        #expect(!warnings.isEmpty && warnings.allSatisfy { !$0.active }, "ended with the run: \(warnings)")
        #expect(!worker.snapshot.livelocked)
    }

    @Test("an end unwinds a deep, busy nest and refuses new nested runs")
    func endUnwinds() throws {
        let (registry, probe) = registry(maxNesting: 1024, nestCPU: 3600)
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.loop))
        for n in 0..<40 {
            _ = try worker.addTimer(TimerSpec(interval: 0.0001 + Double(n) * 0.000004, action: nested(0.001)))
        }
        #expect(probe.waitUntil { worker.snapshot.depthMax > 10 }, "the nest never grew")
        #expect(worker.endAndWait(timeout: 10) != nil, "the end did not unwind the nest")
    }
}
