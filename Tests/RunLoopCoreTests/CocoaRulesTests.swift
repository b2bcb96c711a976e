import CoreFoundation
import Foundation
import Primitives
import Testing

@testable import RunLoopCore

/// Each test states the Cocoa / CF rule it holds runloopd to (issue 14: the
/// lab's defaults follow Cocoa, not runloopd's convenience).
@Suite struct CocoaRulesTests {
    // MARK: performs

    /// Rule: `performSelector:withObject:afterDelay:` (even 0) is a one-shot
    /// timer, and a timer never makes `runMode:beforeDate:` return
    /// handledSource; `performSelector:onThread:` is a source and does.
    @Test func afterDelayZeroIsATimerNotAHandledSource() throws {
        try withWorker(options(.manual)) { worker in
            let delayed = try worker.performCall("count", ["name": "d"], afterDelay: 0)
            #expect(worker.pendingPerforms().first?.delayed == true)
            let exit = try worker.runAndWait(seconds: 0.3, returnAfterSourceHandled: true)
            #expect(exit.reason == .timedOut, "a timer is not a handled source")
            _ = try value(delayed.result)
            #expect(worker.counterValues["d"] == 1)

            let sourced = try worker.performCall("count", ["name": "s"])
            #expect(try worker.runAndWait(seconds: 5, returnAfterSourceHandled: true).reason == .handledSource)
            _ = try value(sourced.result)
        }
    }

    /// Rule: afterDelay performs use the default mode only; onThread performs
    /// the common modes.
    @Test func afterDelayDefaultsToTheDefaultModeAndOnThreadToCommon() throws {
        #expect(PerformSpec(call: SelectorCall(selector: "echo"), afterDelay: 0).modes == [.default])
        #expect(PerformSpec(call: SelectorCall(selector: "echo")).modes == [.common])
        try withWorker(options(.manual)) { worker in
            let tracking = try RunLoopMode("tracking")
            _ = try worker.addCommonMode(tracking)
            let delayed = try worker.performCall("count", ["name": "d"], afterDelay: 0)
            // A run in a (common) tracking mode does not fire a default-mode timer.
            #expect(try worker.runAndWait(tracking, seconds: 0.2).reason != .handledSource)
            #expect(worker.counterValues["d"] == nil)
            #expect(worker.pendingPerforms().map(\.id) == [delayed.id])
            _ = try worker.runAndWait(seconds: 0.2)
            _ = try value(delayed.result)
        }
    }

    /// Rule: cancelPreviousPerformRequestsWithTarget:selector:object: matches
    /// the argument too; without one, every delayed perform of the selector.
    @Test func cancelMatchesArgumentsWhenGiven() throws {
        try withWorker(options(.manual)) { worker in
            let a = try worker.performCall("count", ["name": "a"], afterDelay: 5)
            let b = try worker.performCall("count", ["name": "b"], afterDelay: 5)
            // `by` defaults to 1: the same call, spelled with and without it.
            #expect(worker.cancelDelayedPerforms(selector: "count", args: ["name": "a", "by": 1]) == [a.id])
            #expect(worker.pendingPerforms().map(\.id) == [b.id])
            #expect(worker.cancelDelayedPerforms(selector: "count", args: ["name": "zzz"]).isEmpty)
            #expect(worker.cancelDelayedPerforms(selector: "count") == [b.id])
            #expect(try worker.performStatus(a.id).state == .cancelled)
        }
    }

    /// A perform is followed by id through its life: delayed, then done.
    @Test func performStatusFollowsItsLife() throws {
        try withWorker(options(.manual)) { worker in
            let delayed = try worker.performCall("echo", ["v": 1], afterDelay: 0)
            #expect(try worker.performStatus(delayed.id).state == .delayed)
            let queued = try worker.performCall("echo", ["v": 2])
            #expect(try worker.performStatus(queued.id).state == .pending)
            _ = try worker.runAndWait(seconds: 0.2)
            let done = try worker.performStatus(queued.id)
            #expect(done.state == .done)
            #expect(try done.outcome?.get() == ["v": 2])
            #expect(try worker.performStatus(delayed.id).state == .done)
            #expect(runLoopError { _ = try worker.performStatus("p999999") }?.kind == .notFound)
        }
    }

    // MARK: run styles

    /// Rule: -[NSRunLoop run] repeats runMode:beforeDate:distantFuture; a
    /// CFRunLoopStop ends only the current pass; it returns (and the thread
    /// ends) once a pass finds the mode empty. Removing the port does not wake
    /// the loop (CFRunLoopRemoveSource never does): it sleeps in the emptied
    /// mode until a wake-up ends the pass.
    @Test func runStyleSurvivesStopAndEndsWhenThePortIsRemoved() throws {
        let (registry, probe) = makeRegistry()
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.run))
        // Asleep in the run, so CF has entered it and the stop lands.
        #expect(probe.waitUntil { worker.snapshot.state == .waiting })
        #expect(try worker.stopAndWait().get().reason == .stopped)
        // Asleep in the second pass: a port removed before CF entered it
        // would make that pass finish at once, with no wake-up needed.
        #expect(probe.waitUntil { worker.snapshot.state == .waiting && worker.snapshot.runs == 1 })
        #expect(!worker.hasExited)
        let port = try #require(worker.sourceSnapshots().first { $0.role == .keepAlive })
        #expect(worker.snapshot.keepAliveItem == port.id)
        _ = try worker.invalidateSource(port.id)
        #expect(
            probe.waitUntil {
                worker.warnings().contains { $0.code == "empty_mode_asleep" && $0.active }
            })
        #expect(!worker.hasExited, "the removal alone did not wake the loop")
        #expect(worker.snapshot.state == .waiting)
        #expect(worker.snapshot.runs == 1)
        try worker.wakeUp()
        #expect(probe.waitUntil { worker.hasExited })
        #expect(worker.snapshot.lastExit?.reason == .finished)
        #expect(worker.snapshot.lastExit?.cause?.code == "mode_empty")
    }

    /// Rule (CF on Linux): removing a mode's last timer leaves the mode's
    /// timerfd armed at its fire date. A loop asleep in the emptied mode
    /// wakes once then, finds nothing to fire, and the run returns
    /// finished: the warning and `/why` say so, not "nothing can wake it".
    @Test func aRemovedTimerStillWakesTheLoopOnceAtItsDate() throws {
        let (registry, probe) = makeRegistry()
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.manual, keepAlive: .none))
        var spec = TimerSpec(interval: 1.5, repeats: false, delay: 1.5, mode: .default)
        spec.tolerance = 0
        let timer = try worker.addTimer(spec)
        let fireAt = try #require(timer.nextFireAt)
        let box = Locked<RunExit?>(nil)
        try worker.run(mode: .default, seconds: 30, returnAfterSourceHandled: false) { result in
            box.withLock { $0 = try? result.get() }
        }
        #expect(probe.waitUntil { worker.snapshot.state == .waiting })
        _ = try worker.invalidateTimer(timer.id)
        #expect(
            probe.waitUntil { worker.warnings().contains { $0.code == "empty_mode_asleep" && $0.active } })
        let warning = try #require(worker.warnings().first { $0.code == "empty_mode_asleep" })
        #expect(warning.message.contains("wakes once"), "\(warning.message)")
        #expect(!warning.message.contains("nothing left in it can wake"), "\(warning.message)")
        #expect(warning.details["wakesInMs"] != nil)
        let why = worker.why()
        if Date() < fireAt {
            #expect(why.verdict.contains("wakes once"), "\(why.verdict)")
            #expect(why.modes.first { $0.mode == "default" }?.verdict.contains("returns finished then") == true)
        }
        // No wake-up is sent: the timerfd alone ends the run, at the old date.
        #expect(probe.waitUntil { box.withLock { $0 != nil } })
        let exit = try #require(box.withLock { value in value })
        #expect(exit.reason == .finished)
        #expect(exit.cause?.code == "mode_empty")
        #expect(exit.endedAt >= fireAt.addingTimeInterval(-0.002), "ended \(exit.endedAt), timer was due \(fireAt)")
    }

    /// The removal asked to wake the loop (`?wakeup=true`): the pass ends at once.
    @Test func aRemovalThatAsksForTheWakeUpEndsThePass() throws {
        let (registry, probe) = makeRegistry()
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.run))
        #expect(probe.waitUntil { worker.snapshot.state == .waiting })
        let port = try #require(worker.sourceSnapshots().first { $0.role == .keepAlive })
        _ = try worker.invalidateSource(port.id, wakeUp: true)
        #expect(probe.waitUntil { worker.hasExited })
        #expect(worker.snapshot.lastExit?.reason == .finished)
        #expect(!worker.warnings().contains { $0.code == "empty_mode_asleep" })
    }

    /// Rule: runUntilDate: runs passes until the date, then returns.
    @Test func runUntilDateEndsAtItsDate() throws {
        let (registry, probe) = makeRegistry()
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.runUntilDate, seconds: 0.2))
        #expect(probe.waitUntil { worker.hasExited })
        #expect(worker.snapshot.lastExit?.reason == .timedOut)
    }

    /// Rule: one runMode:beforeDate: returns after the first handled source.
    @Test func runModeOnceReturnsAfterOneSource() throws {
        let (registry, probe) = makeRegistry()
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.runModeOnce, seconds: 30))
        let source = try worker.addSource(SourceSpec(kind: .custom))
        #expect(probe.waitUntil { worker.snapshot.depth == 1 })
        _ = try worker.signalSource(source.id, wakeUp: true)
        #expect(probe.waitUntil { worker.hasExited })
        #expect(worker.snapshot.lastExit?.reason == .handledSource)
        #expect(worker.snapshot.runs == 1)
    }

    /// The articles wait with [NSDate distantFuture]; so does the loop style by default.
    @Test func loopWaitsForTheDistantFutureByDefault() {
        #expect(RunPolicy().isDistantFuture)
        #expect(RunPolicy().style == .loop)
    }

    // MARK: keep-alive and modes

    /// The keep-alive port is a listed, removable source; removing it from a
    /// manual thread's default mode makes the next run finish at once.
    @Test func keepAlivePortIsListedAndRemovable() throws {
        try withWorker(options(.manual)) { worker in
            let listed = worker.sourceSnapshots()
            #expect(listed.count == 1 && listed[0].role == .keepAlive && listed[0].kind == .port)
            #expect(worker.snapshot.sources == 0, "counts are the user's items")
            #expect(try worker.runAndWait(seconds: 0.05).reason == .timedOut)
            _ = try worker.invalidateSource(listed[0].id)
            let exit = try worker.runAndWait(seconds: 5)
            #expect(exit.reason == .finished)
        }
    }

    /// The keep-alive timer is listed with its role, and not counted.
    @Test func keepAliveTimerIsListed() throws {
        try withWorker(options(.manual, keepAlive: .timer)) { worker in
            let timers = worker.timerSnapshots()
            #expect(timers.count == 1 && timers[0].role == .keepAlive && timers[0].interval == 86_400)
            #expect(worker.snapshot.timers == 0)
            _ = try worker.performCall("echo", afterDelay: 5)
            #expect(worker.timerSnapshots().contains { $0.role == .performDelay && $0.modes == ["default"] })
        }
    }

    /// Rule (CFRunLoopAddSource / RemoveSource): one source may be in several
    /// modes; its schedule routine runs per mode added, its cancel routine per
    /// mode removed; removed from one it still fires in the others.
    @Test func aSourceInSeveralModes() throws {
        let (registry, probe) = makeRegistry()
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.manual))
        let tracking = try RunLoopMode("tracking")
        let source = try worker.addSource(SourceSpec(kind: .custom))
        _ = try worker.addSourceMode(source.id, mode: tracking)
        #expect(
            probe.waitUntil { (try? worker.sourceSnapshot(source.id).scheduledIn) == ["default": 1, "tracking": 1] })
        let removed = try worker.removeSourceMode(source.id, mode: .default)
        #expect(removed.modes == ["tracking"])
        #expect(removed.cancelledIn == ["default": 1])
        #expect(removed.valid)
        _ = try worker.signalSource(source.id, wakeUp: true)
        #expect(try worker.runAndWait(tracking, seconds: 5, returnAfterSourceHandled: true).reason == .handledSource)
        #expect(try worker.sourceSnapshot(source.id).fired == 1)
        #expect(runLoopError { _ = try worker.removeSourceMode(source.id, mode: .default) }?.code == "not_in_mode")
    }

    /// Rule (CFRunLoopAddTimer / RemoveTimer): one timer in several modes.
    @Test func aTimerInSeveralModes() throws {
        try withWorker(options(.manual)) { worker in
            let tracking = try RunLoopMode("tracking")
            let timer = try worker.addTimer(TimerSpec(interval: 0.01))
            #expect(try worker.addTimerMode(timer.id, mode: tracking).modes == ["default", "tracking"])
            _ = try worker.runAndWait(tracking, seconds: 0.1)
            let fired = try worker.timerSnapshot(timer.id).fires
            #expect(fired >= 1)
            _ = try worker.removeTimerMode(timer.id, mode: tracking)
            _ = try worker.runAndWait(tracking, seconds: 0.1)
            #expect(try worker.timerSnapshot(timer.id).fires == fired, "no fire in a mode it left")
        }
    }

    // MARK: composable parts

    /// The touch pipeline: a port source whose action signals a custom source
    /// on another thread (`signal` selector), which then fires there.
    @Test func portActionSignalsACustomSourceElsewhere() throws {
        let (registry, probe) = makeRegistry()
        defer { registry.endAll() }
        let receiver = try registry.createWorker(options(.loop))
        let custom = try receiver.addSource(SourceSpec(kind: .custom))
        let sender = try registry.createWorker(options(.loop))
        let port = try sender.addSource(
            SourceSpec(
                kind: .port,
                action: SelectorCall(
                    selector: "signal", args: ["thread": .string(receiver.id), "source": .string(custom.id)])))
        _ = try sender.sendMessage(toSource: port.id, msgid: 7, data: "touch")
        #expect(probe.waitUntil { (try? receiver.sourceSnapshot(custom.id).fired) == 1 })
    }

    /// A port source's action receives the message it handles.
    @Test func portActionReceivesTheMessage() throws {
        let (registry, probe) = makeRegistry()
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.loop))
        let port = try worker.addSource(SourceSpec(kind: .port, action: SelectorCall(selector: "echo")))
        _ = try worker.sendMessage(toSource: port.id, msgid: 42, data: "hello")
        #expect(probe.waitUntil { (try? worker.sourceSnapshot(port.id).lastAction) != nil })
        let last = try #require(try worker.sourceSnapshot(port.id).lastAction)
        #expect(try last.get() == ["message": ["msgid": 42, "data": "hello"]])
    }

    /// `performOn` from a handler: a selector on another thread, waited for.
    @Test func performOnWaitsForAnotherThread() throws {
        let (registry, _) = makeRegistry()
        defer { registry.endAll() }
        let a = try registry.createWorker(options(.loop))
        let b = try registry.createWorker(options(.loop))
        let result = try value(
            a.performCall(
                "performOn",
                [
                    "thread": .string(b.id), "selector": "count", "args": ["name": "remote"],
                    "waitUntilDone": true,
                ]
            ).result)
        #expect(result.object?["waited"] == true)
        #expect(b.counterValues["remote"] == 1)
    }

    /// An observer's action runs at its activity on the loop's thread: the
    /// task manager's beforeWaiting hook.
    @Test func observerActionRunsAtItsActivity() throws {
        let (registry, probe) = makeRegistry()
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.loop))
        let observer = try worker.addObserver(
            ObserverSpec(
                activities: [.beforeWaiting], mode: .default,
                action: SelectorCall(selector: "count", args: ["name": "beforeWaiting"])))
        try worker.wakeUp()
        #expect(probe.waitUntil { (worker.counterValues["beforeWaiting"] ?? 0) >= 1 })
        // The result is recorded just after the selector returns: wait for it too.
        #expect(probe.waitUntil { worker.observerSnapshots().first { $0.id == observer.id }?.lastResult != nil })
        let snapshot = try #require(worker.observerSnapshots().first { $0.id == observer.id })
        #expect(try snapshot.lastResult?.get().object?["name"] == "beforeWaiting")
    }

    /// Every limit answers the same way: a full idle task queue is a limit (429).
    @Test func aFullTaskQueueIsALimit() throws {
        var queue = TaskQueue(capacity: 1)
        try queue.add(id: "a", call: SelectorCall(selector: "echo"))
        let error = runLoopError { try queue.add(id: "b", call: SelectorCall(selector: "echo")) }
        #expect(error?.kind == .limit)
        #expect(error?.code == "queue_full")
    }
}
