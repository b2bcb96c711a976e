import CoreFoundation
import Foundation
import Primitives
import Testing

@testable import RunLoopCore
import RunLoopTestSupport

/// The idle task queue: one task per loop turn, before the loop waits.
@Suite struct TaskQueueTests {
    private func log(_ message: String) -> SelectorCall {
        SelectorCall(selector: "log", args: ["message": .string(message)])
    }

    @Test func tasksRunInOrderOnePerTurn() throws {
        let (registry, probe) = makeRegistry()
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.loop, seconds: 30))
        _ = try worker.addObserver(ObserverSpec(activities: [.afterWaiting]))
        _ = try worker.setTasksSuspended(true)
        for name in ["a", "b", "c"] { _ = try worker.addTask(id: name, call: log(name)) }
        #expect(worker.taskSnapshot().tasks.map(\.id) == ["a", "b", "c"])

        _ = try worker.setTasksSuspended(false)

        #expect(probe.waitUntil { worker.taskSnapshot().done == 3 })
        #expect(worker.log == ["a", "b", "c"])
        #expect(worker.taskSnapshot().tasks.isEmpty)
        // A task's "finished" event follows its count: wait for the events, not only the count.
        #expect(probe.waitUntil { probe.taskChanges(worker.id).filter { $0.change == "finished" }.count == 3 })
        let finished = probe.taskChanges(worker.id).filter { $0.change == "finished" }.map(\.task)
        #expect(finished == ["a", "b", "c"])
        // One per turn: the loop slept and woke between two tasks.
        var sawWake = true
        for event in probe.events {
            switch event {
            case .task(_, _, .started, _):
                #expect(sawWake, "two tasks ran in one turn")
                sawWake = false
            case .activity(_, let record) where record.activity == .afterWaiting:
                sawWake = true
            default: break
            }
        }
    }

    @Test func capacityTenRefusesTheEleventhAndDuplicateIds() throws {
        try withWorker(options(.loop, seconds: 30)) { worker in
            _ = try worker.setTasksSuspended(true)
            for index in 1...10 { _ = try worker.addTask(id: "t\(index)", call: log("\(index)")) }
            #expect(worker.taskSnapshot().capacity == 10)

            let full = runLoopError { _ = try worker.addTask(id: "t11", call: log("11")) }
            #expect(full?.code == "queue_full")

            _ = try worker.removeTask(id: "t10")
            let duplicate = runLoopError { _ = try worker.addTask(id: "t1", call: log("again")) }
            #expect(duplicate?.code == "task_exists")
            #expect(duplicate?.field == "id")
            #expect(runLoopError { _ = try worker.removeTask(id: "nope") }?.kind == .notFound)
            #expect(try worker.removeAllTasks() == 9)
            #expect(worker.taskSnapshot().tasks.isEmpty)
        }
    }

    @Test func suspendedQueueRunsNothingUntilResumed() throws {
        let (registry, probe) = makeRegistry()
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.loop, seconds: 30))
        _ = try worker.addObserver(ObserverSpec(activities: [.beforeWaiting, .afterWaiting]))
        #expect(probe.waitUntil { worker.snapshot.state == .waiting })
        _ = try worker.setTasksSuspended(true)
        let mark = worker.activities().last?.seq ?? 0

        _ = try worker.addTask(id: "held", call: SelectorCall(selector: "count"))
        // addTask wakes the loop: it goes round and reaches beforeWaiting (where
        // the task observer looks, finds the queue suspended) ...
        #expect(probe.waitUntil { worker.activities(since: mark).contains { $0.activity == .beforeWaiting } })
        let idle = worker.activities().last?.seq ?? 0
        // ... and a later wake-up proves that turn finished.
        try worker.wakeUp()
        #expect(probe.waitUntil { worker.activities(since: idle).contains { $0.activity == .afterWaiting } })
        #expect(worker.taskSnapshot().tasks.first?.runs == 0)
        #expect(worker.counterValues.isEmpty)
        #expect(worker.taskSnapshot().suspended)

        _ = try worker.setTasksSuspended(false)
        #expect(probe.waitUntil { worker.taskSnapshot().done == 1 })
        #expect(worker.counterValues["default"] == 1)
    }

    @Test func aRunningTaskCannotBeRemovedAndFinishesWhenSuspended() throws {
        let (registry, probe) = makeRegistry()
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.loop, seconds: 30))

        _ = try worker.addTask(id: "slow", call: SelectorCall(selector: "sleep", args: ["ms": 300]))
        #expect(
            probe.waitUntil { probe.taskChanges(worker.id).contains { $0.task == "slow" && $0.change == "started" } })
        #expect(worker.taskSnapshot().tasks.first?.running == true)

        let removing = runLoopError { _ = try worker.removeTask(id: "slow") }
        #expect(removing?.code == "task_running")
        #expect(runLoopError { _ = try worker.removeAllTasks() }?.code == "task_running")
        // Suspending does not interrupt the running task.
        _ = try worker.setTasksSuspended(true)

        #expect(probe.waitUntil { worker.taskSnapshot().done == 1 })
        #expect(runLoopError { _ = try worker.removeTask(id: "slow") }?.kind == .notFound)
        #expect(probe.waitUntil { probe.taskChanges(worker.id).last?.change == "finished" })
        #expect(probe.taskChanges(worker.id).map(\.change) == ["added", "started", "finished"])
    }

    @Test func aStepTaskRunsAgainOnLaterTurnsUntilFinished() throws {
        let (registry, probe) = makeRegistry()
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.loop, seconds: 30))

        _ = try worker.addTask(id: "steps", call: SelectorCall(selector: "step", args: ["until": 3]))

        #expect(probe.waitUntil { worker.taskSnapshot().done == 1 })
        #expect(worker.counterValues["steps"] == 3)
        #expect(probe.waitUntil { probe.taskChanges(worker.id).last?.change == "finished" })
        let changes = probe.taskChanges(worker.id).map(\.change)
        #expect(changes == ["added", "started", "ran", "started", "ran", "started", "finished"])
    }

    @Test func failingTaskIsRemovedAndCounted() throws {
        let (registry, probe) = makeRegistry()
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.loop, seconds: 30))

        _ = try worker.addTask(id: "bad", call: SelectorCall(selector: "fail"))

        #expect(probe.waitUntil { worker.taskSnapshot().failed == 1 })
        #expect(worker.taskSnapshot().tasks.isEmpty)
    }

    @Test func executeNowRunsThroughTheCommandSourceEvenWhenSuspended() throws {
        try withWorker(options(.loop, seconds: 30)) { worker in
            _ = try worker.setTasksSuspended(true)

            let done = Mailbox<PerformResult>()
            try worker.executeTask(SelectorCall(selector: "count")) { done.put($0) }

            _ = try value(done)
            #expect(worker.counterValues["default"] == 1)
        }
    }

    /// Regression (issue 7): `setTasksSuspended` on an ended thread threw while
    /// holding the worker's lock, so the next reader (`GET /api/threads`) and
    /// shutdown (`end`) blocked forever. Every refused call must leave the
    /// worker readable; the calls run on a helper thread under a deadline.
    @Test func refusedCallsOnAnEndedThreadLeaveItReadable() throws {
        try withWorker(options(.loop, seconds: 30)) { worker in
            #expect(worker.endAndWait(timeout: 10) != nil)
            let finished = DispatchSemaphore(value: 0)
            let codes = Locked<[String]?>(nil)
            Thread.detachNewThread {
                var seen: [String] = []
                for _ in 0..<2 {
                    seen.append(runLoopError { _ = try worker.setTasksSuspended(true) }?.code ?? "none")
                    seen.append(runLoopError { _ = try worker.setTasksSuspended(false) }?.code ?? "none")
                    seen.append(
                        runLoopError { _ = try worker.addTask(id: "x", call: SelectorCall(selector: "count")) }?.code
                            ?? "none")
                    seen.append(runLoopError { _ = try worker.addTimer(TimerSpec(interval: 1)) }?.code ?? "none")
                    seen.append(runLoopError { _ = try worker.addSource(SourceSpec(kind: .custom)) }?.code ?? "none")
                    seen.append(
                        runLoopError { _ = try worker.addObserver(ObserverSpec(activities: [.entry])) }?.code ?? "none")
                    seen.append(runLoopError { _ = try worker.addCommonMode(try RunLoopMode("x")) }?.code ?? "none")
                    seen.append(
                        runLoopError { _ = try worker.perform(PerformSpec(call: SelectorCall(selector: "count"))) }?
                            .code
                            ?? "none")
                    _ = worker.snapshot
                    _ = worker.taskSnapshot()
                }
                worker.end()
                codes.withLock { $0 = seen }
                finished.signal()
            }
            #expect(finished.wait(timeout: .now() + 10) == .success, "a refused call left the worker's lock held")
            let seen = codes.withLock { $0 }
            #expect(seen?.allSatisfy { $0 == "thread_exited" } == true, "\(seen ?? [])")
        }
    }
}
