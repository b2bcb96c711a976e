import CoreFoundation
import Foundation
import Testing

@testable import RunLoopCore

/// Timers: max fires, returnAfterSourceHandled, modes and common modes.
@Suite struct TimerTests {
    @Test func repeatingTimerInvalidatedAfterTwoFiresLeavesTheModeFinished() throws {
        try withWorker(options(.manual, keepAlive: .none)) { worker in
            let timer = try worker.addTimer(TimerSpec(interval: 0.1, maxFires: 2))
            #expect(timer.valid)
            #expect(timer.maxFires == 2)

            let exit = try worker.runAndWait(seconds: 10)

            #expect(exit.reason == .finished, "the invalidated timer was the mode's last item")
            #expect(exit.duration >= 0.15, "two intervals passed first (\(exit.duration) s)")
            #expect(exit.duration < 8, "it did not wait for the timeout")
            let after = try #require(worker.timerSnapshots().first)
            #expect(after.fires == 2)
            #expect(!after.valid)
            #expect(after.nextFireAt == nil)
            #expect(after.lateness.lastMs != nil)
            #expect((after.lateness.maxMs ?? -1) >= 0)
            #expect(worker.snapshot.timers == 0)
        }
    }

    @Test func liveTimerCountFollowsOneShotsInvalidationAndTheLimit() throws {
        var limits = Limits()
        limits.maxTimersPerWorker = 3
        let (registry, _) = makeRegistry(limits)
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.manual, keepAlive: .none))
        _ = try worker.addTimer(TimerSpec(interval: 0.05, repeats: false))
        let repeating = try worker.addTimer(TimerSpec(interval: 60))
        _ = try worker.addTimer(TimerSpec(interval: 60))
        #expect(worker.snapshot.timers == 3)
        #expect(throws: RunLoopError.self) { try worker.addTimer(TimerSpec(interval: 60)) }

        _ = try worker.invalidateTimer(repeating.id)
        _ = try worker.invalidateTimer(repeating.id)
        #expect(worker.snapshot.timers == 2, "invalidating twice counts once")
        // The one-shot fires once, then CF invalidates it.
        #expect(try worker.runAndWait(seconds: 0.3).reason == .timedOut)
        #expect(worker.timerSnapshots().first?.fires == 1)
        #expect(worker.snapshot.timers == 1)
        _ = try worker.addTimer(TimerSpec(interval: 60))
        _ = try worker.addTimer(TimerSpec(interval: 60))
        #expect(worker.snapshot.timers == 3)
    }

    @Test func theThreadCountsEveryTimerFireOverItsLife() throws {
        try withWorker(options(.manual, keepAlive: .none)) { worker in
            #expect(worker.snapshot.timerFires == 0)
            _ = try worker.addTimer(TimerSpec(interval: 0.02, repeats: false))
            _ = try worker.addTimer(TimerSpec(interval: 0.02, maxFires: 3))

            #expect(try worker.runAndWait(seconds: 10).reason == .finished)

            // both are invalid now (the one-shot by CF, the other after its
            // third fire) and count no more as timers; their fires stay
            #expect(worker.snapshot.timers == 0)
            #expect(worker.snapshot.timerFires == 4)
            #expect(worker.timerSnapshots().map(\.fires).reduce(0, +) == 4)
        }
    }

    @Test func aTimerNeverMakesAReturnAfterSourceHandledRunReturn() throws {
        try withWorker(options(.manual)) { worker in
            _ = try worker.addTimer(TimerSpec(interval: 0.05))

            let exit = try worker.runAndWait(seconds: 0.4, returnAfterSourceHandled: true)

            #expect(exit.reason == .timedOut)
            let fires = try #require(worker.timerSnapshots().first).fires
            #expect(fires >= 2, "the timer fired (\(fires) times) and the run still waited for its timeout")
        }
    }

    @Test func timerActionRunsOnEveryFire() throws {
        let (registry, probe) = makeRegistry()
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.loop, seconds: 30))
        _ = try worker.addTimer(
            TimerSpec(interval: 0.02, action: SelectorCall(selector: "count", args: ["name": "ticks"]), maxFires: 3))

        #expect(probe.waitUntil { worker.counterValues["ticks"] == 3 })
        #expect(probe.waitUntil { worker.timerSnapshots().first?.valid == false })
        #expect(worker.timerSnapshots().first?.fires == 3)
    }

    @Test func timerInAnotherModeIsSilentWhileTheLoopRunsDefault() throws {
        try withWorker(options(.manual)) { worker in
            let custom = try RunLoopMode("custom")
            _ = try worker.addTimer(TimerSpec(interval: 0.05, mode: custom))

            let inDefault = try worker.runAndWait(seconds: 0.3)
            #expect(inDefault.reason == .timedOut)
            #expect(worker.timerSnapshots().first?.fires == 0, "paused, not lost")

            let inCustom = try worker.runAndWait(custom, seconds: 0.3)
            #expect(inCustom.reason == .timedOut)
            #expect(inCustom.mode == "custom")
            #expect((worker.timerSnapshots().first?.fires ?? 0) >= 1)
        }
    }

    @Test func timerInCommonModesFiresInAModeAddedToTheCommonSet() throws {
        try withWorker(options(.manual, keepAlive: .none)) { worker in
            let extra = try RunLoopMode("extra")
            // Added to common modes before "extra" joins the set: CF copies it over.
            _ = try worker.addTimer(TimerSpec(interval: 0.05, repeats: false, mode: .common))

            let modes = try worker.addCommonMode(extra)
            #expect(modes.common == ["default", "extra"])
            #expect(modes.all.contains("extra"))

            let exit = try worker.runAndWait(extra, seconds: 10)
            #expect(exit.reason == .finished, "the one-shot timer fired in extra and left it empty")
            #expect(exit.duration < 8)
            #expect(worker.timerSnapshots().first?.fires == 1)
        }
    }

    @Test func commonIsNotAModeToRunIn() throws {
        try withWorker(options(.manual)) { worker in
            let error = runLoopError { _ = try worker.startRun(.common, seconds: 1) }
            #expect(error?.field == "mode")
            #expect(runLoopError { _ = try worker.addCommonMode(.common) }?.field == "mode")
        }
        #expect(try RunLoopMode("common").isCommon)
        #expect(try RunLoopMode("kCFRunLoopDefaultMode") == .default)
        // Cocoa's names, as the articles write them, are the same modes.
        #expect(try RunLoopMode("NSDefaultRunLoopMode") == .default)
        #expect(try RunLoopMode("NSRunLoopCommonModes").isCommon)
        #expect(try RunLoopMode("kCFRunLoopCommonModes").isCommon)
    }

    @Test func invalidatedTimerStopsFiring() throws {
        try withWorker(options(.manual, keepAlive: .none)) { worker in
            let timer = try worker.addTimer(TimerSpec(interval: 0.05, tolerance: 0.5))
            #expect(timer.tolerance == 0.5)

            let invalidated = try worker.invalidateTimer(timer.id)

            #expect(!invalidated.valid)
            let exit = try worker.runAndWait(seconds: 5)
            #expect(exit.reason == .finished)
            #expect(worker.timerSnapshots().first?.fires == 0)
            #expect(runLoopError { _ = try worker.invalidateTimer("tm999") }?.kind == .notFound)
        }
    }

    @Test func toleranceIsReportedButCFOnLinuxFiresOnTheFireDate() throws {
        try withWorker(options(.manual, keepAlive: .none)) { worker in
            // With tolerance honoured, CF could fire this up to 20 s late.
            let timer = try worker.addTimer(TimerSpec(interval: 0.05, repeats: false, tolerance: 20))
            #expect(timer.tolerance == 20)

            let exit = try worker.runAndWait(seconds: 60)

            #expect(exit.reason == .finished)
            #expect(exit.duration < 10, "tolerance ignored: fired after \(exit.duration) s")
            #expect(worker.timerSnapshots().first?.fires == 1)
        }
    }
}
