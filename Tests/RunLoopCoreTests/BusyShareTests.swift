import Foundation
import RunLoopTestSupport
import Testing

@testable import RunLoopCore

/// Busy over the time the loop existed in the window (issue 39): a thread's
/// `load.utilization` is its busy time over the part of the window during
/// which it existed, not busy / (busy + asleep), which read 100 % for a
/// manual thread whose one run took 0.7 ms (it never slept).
@Suite("Busy share over the time the thread existed")
struct BusyShareTests {
    @Test func overThePartOfTheWindowTheThreadExisted() {
        // Made at 100 s (monotonic), a 10 s window; one turn of 0.7 ms, no sleep.
        var window = UtilizationWindow(window: 10, since: 100)
        window.add(busyMs: 0.7, sleptMs: 0, at: 100.5)
        // The old measure: busy / (busy + asleep) is the whole of it.
        #expect(window.utilization(now: 100.5).ratio == 1)
        // 0.7 ms of the 0.5 s it has existed.
        let young = window.busyShare(now: 100.5)
        #expect(abs(young.existed - 0.5) < 1e-9)
        #expect(abs((young.ratio ?? -1) - 0.7 / 500) < 1e-9)
        // Ten seconds on, over the whole window: that turn has left it.
        let later = window.busyShare(now: 112)
        #expect(abs(later.existed - 10) < 1e-9 && later.ratio == 0)
        // Over its life: 0.7 ms of 12 s.
        #expect(abs((window.lifetimeShare(busyMs: 0.7, now: 112) ?? -1) - 0.7 / 12_000) < 1e-12)

        // A thread that has existed 1 ms of a long window: its busy share of that 1 ms, not 100 %.
        var newborn = UtilizationWindow(window: 10, since: 200)
        newborn.add(busyMs: 0.4, sleptMs: 0, at: 200.001)
        let share = newborn.busyShare(now: 200.001)
        #expect(abs(share.existed - 0.001) < 1e-9)
        #expect(abs((share.ratio ?? -1) - 0.4) < 1e-6)

        // Ended at 101 s: 4 s later it existed 1 s of the window (0.7 ms busy in it); 11 s later, none.
        window.until = 101
        let ended = window.busyShare(now: 105)
        #expect(abs(ended.existed - 1) < 1e-9)
        #expect(abs((ended.ratio ?? -1) - 0.7 / 1000) < 1e-9)
        #expect(window.busyShare(now: 112).ratio == nil)
        #expect(abs((window.lifetimeShare(busyMs: 0.7, now: 500) ?? -1) - 0.7 / 1000) < 1e-12)
    }

    @Test func aManualThreadRunOnceIsNotBusy() throws {
        try withWorker(options(.manual)) { worker in
            // It exists a tenth of a second before anyone runs it (a condition with a deadline).
            #expect(waitUntil(timeout: 10) { worker.load().coveredSeconds >= 0.1 })
            #expect(try worker.runAndWait(seconds: 0).reason == .timedOut)
            let load = worker.load()
            #expect(load.stats.turns >= 1)
            // It never slept: busy / (busy + asleep) would read 100 %.
            #expect(load.stats.lifetimeUtilization == 1)
            let ratio = try #require(load.utilization)
            #expect(load.coveredSeconds >= 0.1 && load.coveredSeconds <= load.window)
            // Its busy time over the time it existed in the window.
            #expect(ratio < 0.5, "busy \(load.stats.busyMs) ms of \(load.coveredSeconds) s")
            #expect(abs(ratio - load.stats.busyMs / (load.coveredSeconds * 1000)) < 0.05)
            #expect(try #require(load.lifetimeUtilization) < 0.5)
        }
    }
}
