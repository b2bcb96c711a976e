import CoreFoundation
import Foundation
import Testing

@testable import RunLoopCore
import RunLoopTestSupport

/// Run styles, exit reasons, stop, end and nested runs.
@Suite struct WorkerRunTests {
    @Test func emptyModeFinishesAtOnceWithoutEntryOrExit() throws {
        try withWorker(options(.manual, keepAlive: .none)) { worker in
            // An observer alone does not keep a mode alive, and sees nothing.
            _ = try worker.addObserver(ObserverSpec(mode: .default))

            let exit = try worker.runAndWait(seconds: 5)

            #expect(exit.reason == .finished)
            #expect(exit.duration < 2.5, "finished must not wait for the 5 s timeout")
            #expect(worker.activityNames.isEmpty, "an empty mode returns without entry/exit notifications")
            let snapshot = worker.snapshot
            #expect(snapshot.runs == 1)
            #expect(snapshot.exits == [.finished: 1])
            #expect(snapshot.state == .idle)
        }
    }

    @Test func loopWorkerWithEmptyModeParksAndAddingATimerUnparksIt() throws {
        let (registry, probe) = makeRegistry()
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.loop, keepAlive: .none, seconds: 1))

        #expect(probe.waitUntil { worker.snapshot.parked })
        let parked = worker.snapshot
        #expect(parked.state == .idle)
        #expect(parked.exits[.finished] == parked.runs)
        #expect(parked.runs <= 2, "a parked worker does not spin on finished")

        let timer = try worker.addTimer(TimerSpec(interval: 0.05, repeats: false))
        #expect(probe.waitUntil { worker.timerSnapshots().first?.fires == 1 })
        // The one-shot timer fired and left the mode empty again: parked once more.
        #expect(probe.waitUntil { probe.threadChanges(worker.id, "parked") >= 2 && worker.snapshot.parked })
        let after = worker.snapshot
        #expect(probe.threadChanges(worker.id, "unparked") >= 1)
        #expect(after.runs >= parked.runs + 1)
        #expect(after.runs <= parked.runs + 3, "runs stay small: \(after.runs)")
        #expect(after.exits[.finished] == after.runs)
        #expect(worker.timerSnapshots().first?.id == timer.id)
    }

    @Test func timeoutReturnsTimedOut() throws {
        try withWorker(options(.manual)) { worker in
            let exit = try worker.runAndWait(seconds: 0.1)

            #expect(exit.reason == .timedOut)
            #expect(exit.duration >= 0.09)
            #expect(exit.depth == 0)
            #expect(worker.snapshot.exits == [.timedOut: 1])
        }
    }

    @Test func stopFromAnotherThreadEndsTheRunWithStopped() throws {
        let (registry, probe) = makeRegistry()
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.loop, seconds: 30))
        #expect(probe.waitUntil { worker.snapshot.state == .waiting })

        let exit = try worker.stopAndWait().get()

        #expect(exit.reason == .stopped)
        #expect(exit.duration < 29, "the stop, not the timeout, ended the run")
        #expect(exit.depth == 0)
        #expect(worker.snapshot.exits[.stopped] == 1)
    }

    /// A stop sent the moment a run is recorded may land before CF has entered
    /// the run (when CF would drop it): asked with `atEntry` it is applied at
    /// `entry`, never lost. The window is a few hundred nanoseconds, so this
    /// is a regression guard for the whole path (stop right after start →
    /// `stopped`, promptly), not a deterministic reproduction of the race.
    @Test func aStopAtEntryRightAfterARunStartsIsNeverLost() throws {
        try withWorker(options(.manual)) { worker in
            for _ in 0..<200 {
                let run = try worker.startRun(seconds: 30)
                // Stop as early as possible: retry while the run is not yet recorded.
                var reply: Result<RunExit, RunLoopError>
                repeat {
                    reply = try worker.stopAndWait(atEntry: true)
                } while (try? reply.get()) == nil && reply.errorCode == "not_running"
                let exit = try reply.get()
                #expect(exit.reason == .stopped)
                #expect(exit.duration < 10, "the stop, not the 30 s timeout, ended the run")
                let done = try #require(run.wait(15))
                #expect(try done.get().reason == .stopped)
            }
        }
    }

    /// CF's rule by default: a run runloopd has recorded but CF has not
    /// entered has no stop flag yet, so a stop then is dropped (`stop_dropped`)
    /// and the run goes on; `atEntry` keeps it for the entry. The frame is
    /// put in place by hand, to reach that window deterministically.
    @Test func aStopBeforeCFEntersTheRunIsDroppedUnlessKeptForEntry() throws {
        try withWorker(options(.manual)) { worker in
            worker.book.withLock { $0.runStack.append(RunFrame(seq: 999, mode: "default")) }
            let dropped = try worker.stopAndWait()
            guard case .failure(let error) = dropped else {
                Issue.record("a stop before entry replied \(dropped)")
                return
            }
            #expect(error.code == "stop_dropped")
            #expect(error.kind == .conflict)
            #expect(error.message.contains("fresh stop flag"))
            #expect(worker.book.withLock { !$0.runStack[0].stopRequested && $0.stopWaiters.isEmpty })

            let kept = Mailbox<Result<RunExit, RunLoopError>>()
            worker.stop(atEntry: true) { kept.put($0) }
            #expect(worker.book.withLock { $0.runStack[0].stopRequested && $0.stopWaiters.count == 1 })
            worker.book.withLock { b in
                b.runStack.removeAll()
                b.stopWaiters.removeAll()
            }
            // The next real run is unaffected by the dropped stop.
            #expect(try worker.runAndWait(seconds: 0.05).reason == .timedOut)
        }
    }

    @Test func loopStyleReentersAfterEachStop() throws {
        let (registry, probe) = makeRegistry()
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.loop, seconds: 30))

        for round in 1...3 {
            #expect(probe.waitUntil { worker.snapshot.state == .waiting && worker.snapshot.runs == round - 1 })
            let exit = try worker.stopAndWait().get()
            #expect(exit.reason == .stopped)
            #expect(exit.run == round)
        }
        // The loop re-entered after the third stop too.
        #expect(probe.waitUntil { worker.snapshot.state == .waiting })
        let snapshot = worker.snapshot
        #expect(snapshot.runs == 3)
        #expect(snapshot.exits == [.stopped: 3])
        #expect(!worker.hasExited)
    }

    @Test func stopWithNoRunIsNotRunningAndTheNextRunIsUnaffected() throws {
        try withWorker(options(.manual)) { worker in
            let stop = try worker.stopAndWait()
            guard case .failure(let error) = stop else {
                Issue.record("stop without a run replied \(stop)")
                return
            }
            #expect(error.code == "not_running")
            #expect(error.kind == .conflict)

            // CF keeps no stop flag: the next run times out normally.
            let exit = try worker.runAndWait(seconds: 0.05)
            #expect(exit.reason == .timedOut)
            #expect(worker.snapshot.exits == [.timedOut: 1])
        }
    }

    @Test func foreverStyleThreadEndsAfterStop() throws {
        let (registry, probe) = makeRegistry()
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.forever))
        #expect(probe.waitUntil { worker.snapshot.state == .waiting })

        let exit = try worker.stopAndWait().get()

        #expect(exit.reason == .stopped)
        #expect(probe.waitUntil { worker.hasExited })
        let snapshot = worker.snapshot
        #expect(snapshot.state == .exited)
        #expect(snapshot.runs == 1)
        #expect(snapshot.exits == [.stopped: 1])
        #expect(probe.threadChanges(worker.id, "exited") == 1)
    }

    @Test func foreverStyleWithoutKeepAliveFinishesAndEnds() throws {
        let (registry, probe) = makeRegistry()
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.forever, keepAlive: .none))

        #expect(probe.waitUntil { worker.hasExited })
        #expect(worker.snapshot.exits == [.finished: 1])
    }

    @Test func runStyleWithAnEmptyModeNeverEntersCF() throws {
        // RunLoop.run(mode:before:) asks _CFRunLoopFinished first (CFRunLoopRun above does enter).
        let (registry, probe) = makeRegistry()
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.run, keepAlive: .none))

        #expect(probe.waitUntil { worker.hasExited })
        #expect(worker.snapshot.runs == 0)
        #expect(worker.snapshot.exits.values.reduce(0, +) == 0)
    }

    @Test func endJoinsTheThread() throws {
        let (registry, probe) = makeRegistry()
        defer { registry.endAll() }
        let name = "end\(uniqueTag())"
        let worker = try registry.createWorker(options(.loop, seconds: 30, name: name))
        #expect(probe.waitUntil { worker.snapshot.state == .waiting })
        #expect(threadNames().contains(name))

        let final = try #require(worker.endAndWait(timeout: 10))

        #expect(final.state == .exited)
        #expect(final.ending)
        #expect(final.endedAt != nil)
        #expect(final.lastExit?.reason == .stopped, "end stops the run under way")
        #expect(worker.hasExited)
        // Joined: the kernel task goes too. pthread_join returns once the
        // kernel cleared the thread's id, a moment before it removes the task
        // from /proc (a window ThreadSanitizer's slowed exit made visible once).
        #expect(waitUntil(timeout: 10) { !threadNames().contains(name) }, "\(threadNames())")
        // Work for an ended worker is refused.
        let error = runLoopError { _ = try worker.addTimer(TimerSpec(interval: 1)) }
        #expect(error?.code == "thread_exited")
        // A second end answers at once with the same final state.
        #expect(worker.endAndWait(timeout: 5)?.state == .exited)
    }

    @Test func endAnswersPendingWorkAsThreadEnded() throws {
        try withWorker(options(.manual)) { worker in
            let perform = try worker.performCall("echo")

            _ = try #require(worker.endAndWait(timeout: 10))

            let result = try #require(perform.result.wait())
            guard case .failure(let error) = result.outcome else {
                Issue.record("a perform that never ran reported \(result.outcome)")
                return
            }
            #expect(error.code == "thread_ended")
        }
    }

    @Test func nestedRunReportsItsOwnExitWhileTheOuterRunContinues() throws {
        let (registry, probe) = makeRegistry()
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.loop, seconds: 30))
        #expect(probe.waitUntil { worker.snapshot.state == .waiting })

        let nested = try worker.performCall("runNested", ["seconds": 0.1])
        let result = try value(nested.result).object ?? [:]

        #expect(result["exitReason"] == "timedOut")
        #expect(result["code"] == .number(3))
        #expect(result["depth"] == .number(1))
        let snapshot = worker.snapshot
        #expect(snapshot.runs == 1, "only the nested run returned")
        #expect(snapshot.lastExit?.depth == 1)
        #expect(snapshot.lastExit?.reason == .timedOut)
        #expect(snapshot.depth == 1, "the outer run is still under way")

        let outer = try worker.stopAndWait().get()
        #expect(outer.reason == .stopped)
        #expect(outer.depth == 0)
    }

    @Test func stopEndsOnlyTheInnermostNestedRun() throws {
        let (registry, probe) = makeRegistry()
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.loop, seconds: 30))
        #expect(probe.waitUntil { worker.snapshot.state == .waiting })

        let nested = try worker.performCall("runNested", ["seconds": 30])
        #expect(probe.waitUntil { worker.snapshot.depth == 2 && worker.snapshot.state == .waiting })
        let inner = try worker.stopAndWait().get()

        #expect(inner.reason == .stopped)
        #expect(inner.depth == 1)
        #expect(try value(nested.result).object?["exitReason"] == "stopped")
        // The outer run goes on waiting.
        #expect(probe.waitUntil { worker.snapshot.depth == 1 && worker.snapshot.state == .waiting })
        #expect(worker.snapshot.runs == 1)
    }
}
