import CoreFoundation
import Foundation
import Testing

@testable import RunLoopCore

/// performSelector:onThread: through the command source, afterDelay and cancel.
@Suite struct PerformTests {
    @Test func performOnARunModeBeforeDateRunIsAHandledSource() throws {
        try withWorker(options(.manual)) { worker in
            let perform = try worker.performCall("echo", ["x": 1])

            let exit = try worker.runAndWait(seconds: 10, returnAfterSourceHandled: true)

            #expect(exit.reason == .handledSource)
            #expect(try value(perform.result) == ["x": 1])
            #expect(worker.pendingPerforms().isEmpty)
        }
    }

    @Test func performsRunInOrderInOneBatch() throws {
        try withWorker(options(.manual)) { worker in
            let performs = try (1...5).map { try worker.performCall("log", ["message": .string("m\($0)")]) }

            let exit = try worker.runAndWait(seconds: 10, returnAfterSourceHandled: true)

            #expect(exit.reason == .handledSource)
            for perform in performs { _ = try value(perform.result) }
            #expect(worker.log == ["m1", "m2", "m3", "m4", "m5"])
        }
    }

    @Test func performToALoopThatIsNotRunningStaysPendingThenRunsOnTheNextRun() throws {
        let (registry, probe) = makeRegistry()
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.manual))

        let perform = try worker.performCall("count", timeout: 0.2)
        let answer = try #require(perform.result.wait())
        guard case .failure(let error) = answer.outcome else {
            Issue.record("a perform on a loop that is not running answered \(answer.outcome)")
            return
        }
        #expect(error.code == "deadline_exceeded")
        #expect(error.kind == .deadline)
        #expect(worker.pendingPerforms().map(\.id) == [perform.id])
        #expect(worker.snapshot.pendingPerforms.count == 1)
        #expect(worker.counterValues.isEmpty)

        let exit = try worker.runAndWait(seconds: 10, returnAfterSourceHandled: true)

        #expect(exit.reason == .handledSource)
        // Two perform events: the caller's deadline, then the run itself.
        #expect(probe.waitUntil { probe.performResults(perform.id).count == 2 })
        #expect(probe.performResults(perform.id).first.map { (try? $0.outcome.get()) == nil } == true)
        #expect(try probe.performResults(perform.id).last?.outcome.get().object?["value"] == .number(1))
        #expect(worker.counterValues["default"] == 1)
        #expect(worker.pendingPerforms().isEmpty)
    }

    @Test func performForAModeTheLoopDoesNotRunStaysPending() throws {
        let (registry, probe) = makeRegistry()
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.manual))
        let other = try RunLoopMode("other")
        let perform = try worker.performCall("count", modes: [other])

        #expect(try worker.runAndWait(seconds: 0.1, returnAfterSourceHandled: true).reason == .timedOut)
        #expect(worker.pendingPerforms().count == 1)

        #expect(try worker.runAndWait(other, seconds: 10, returnAfterSourceHandled: true).reason == .handledSource)
        _ = try value(perform.result)
        #expect(probe.waitUntil { worker.pendingPerforms().isEmpty })
    }

    @Test func keepAliveNoneWorkerStillFinishesOnceItsOnlyPerformRan() throws {
        try withWorker(options(.manual, keepAlive: .none)) { worker in
            let perform = try worker.performCall("count")

            let exit = try worker.runAndWait(seconds: 10)

            #expect(exit.reason == .finished, "the command source left the mode once its buffer was empty")
            #expect(exit.duration < 8)
            _ = try value(perform.result)
            #expect(worker.counterValues["default"] == 1)
            #expect(try worker.runAndWait(seconds: 5).reason == .finished)
        }
    }

    @Test func parkedLoopWorkerRunsAPerformAndParksAgain() throws {
        let (registry, probe) = makeRegistry()
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.loop, keepAlive: .none, seconds: 1))
        #expect(probe.waitUntil { worker.snapshot.parked })

        for round in 1...3 {
            let perform = try worker.performCall("count")
            _ = try value(perform.result)
            #expect(worker.counterValues["default"] == round)
            #expect(probe.waitUntil { probe.threadChanges(worker.id, "parked") >= round + 1 })
        }
        let snapshot = worker.snapshot
        #expect(snapshot.exits[.finished] == snapshot.runs)
        #expect(snapshot.runs <= 8, "no spinning: \(snapshot.runs) runs")
    }

    @Test func afterDelayPerformsAndCancelDelayedPerforms() throws {
        let (registry, probe) = makeRegistry()
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.loop, seconds: 30))
        let first = try worker.performCall("count", afterDelay: 0.2)
        let second = try worker.performCall("count", afterDelay: 0.2)
        let later = try worker.performCall("log", ["message": "later"], afterDelay: 0.5)

        let pending = worker.pendingPerforms()
        #expect(Set(pending.map(\.id)) == [first.id, second.id, later.id])
        #expect(pending.allSatisfy { $0.fireAt != nil && $0.afterDelay > 0 })

        #expect(worker.cancelDelayedPerforms(selector: "count").count == 2)
        #expect(worker.cancelDelayedPerforms(selector: "count").isEmpty)
        for cancelled in [first, second] {
            let result = try #require(cancelled.result.wait())
            guard case .failure(let error) = result.outcome else {
                Issue.record("a cancelled perform answered \(result.outcome)")
                continue
            }
            #expect(error.code == "cancelled")
        }
        #expect(worker.pendingPerforms().map(\.id) == [later.id])

        // The kept one runs after its delay, later than the cancelled ones would have.
        _ = try value(later.result)
        #expect(worker.log == ["later"])
        #expect(worker.counterValues["default"] == nil)
        #expect(probe.waitUntil { worker.pendingPerforms().isEmpty })
    }

    @Test func afterDelayPerformKeepsAKeepAliveNoneLoopRunningUntilItFires() throws {
        try withWorker(options(.manual, keepAlive: .none)) { worker in
            let perform = try worker.performCall("count", afterDelay: 0.1)

            let exit = try worker.runAndWait(seconds: 10)

            #expect(exit.reason == .finished, "its one-shot timer fired and left the mode empty")
            #expect(exit.duration >= 0.05)
            _ = try value(perform.result)
        }
    }

    @Test func failingSelectorReportsItsError() throws {
        try withWorker(options(.loop)) { worker in
            let perform = try worker.performCall("fail", ["message": "nope"])

            let result = try #require(perform.result.wait())
            guard case .failure(let error) = result.outcome else {
                Issue.record("fail answered \(result.outcome)")
                return
            }
            #expect(error.code == "selector_failed")
            #expect(error.message == "nope")
        }
    }

    @Test func stopSelectorStopsTheRunFromInsideAHandler() throws {
        let (registry, probe) = makeRegistry()
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.loop, seconds: 30))
        #expect(probe.waitUntil { worker.snapshot.state == .waiting })

        _ = try value(try worker.performCall("stop").result)

        #expect(probe.waitUntil { worker.snapshot.exits[.stopped] == 1 })
        // Loop style: the loop re-enters.
        #expect(probe.waitUntil { worker.snapshot.state == .waiting })
    }
}
