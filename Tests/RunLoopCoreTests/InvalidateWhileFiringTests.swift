import Foundation
import RunLoopTestSupport
import Testing

@testable import RunLoopCore

/// An observer, a timer or a delayed perform invalidated (deleted,
/// cancelled) from another thread while its callout runs on the loop's
/// thread. `CFRunLoopObserverInvalidate` releases an observer's info at once,
/// even mid-callout (`__CFRunLoopDoObservers` passes it unretained): the
/// predict differential once crashed there (a call to a freed block's code
/// pointer, 0x3). Observers and timers now call a C function whose info CF
/// does not own. A timer's callout holds its info retained
/// (`__CFRunLoopDoTimer`), so a delayed perform's block timer is safe; its
/// cancel racing its fire must still end one way or the other. This hammers
/// the window: a loop turning every 0.2 ms, each observer and timer
/// invalidated as soon as it fired once, each delayed perform cancelled a
/// random moment after it was queued. It passes by not crashing the test
/// process, and by both ends happening.
@Suite struct InvalidateWhileFiringTests {
    @Test func invalidatingAsTheyFireNeverCrashes() throws {
        try withWorker(options(.loop)) { worker in
            _ = try worker.addTimer(TimerSpec(interval: 0.0002))
            let deadline = Monotonic.now() + 3
            var rounds = 0
            while Monotonic.now() < deadline {
                let observer = try worker.addObserver(ObserverSpec(mode: .default))
                let timer = try worker.addTimer(TimerSpec(interval: 0.0002, delay: 0))
                let fired = Monitor(false)
                // Until each has fired once (it is in the loop, firing), or a
                // short bound: the point is to invalidate it mid-callout.
                _ = fired.wait(timeout: 0.05, recheckEvery: 0.0005) {
                    (worker.observerSnapshots().first { $0.id == observer.id }?.fired ?? 0) > 0
                }
                _ = try worker.invalidateObserver(observer.id)
                _ = try worker.invalidateTimer(timer.id)
                rounds += 1
            }
            #expect(rounds > 10, "only \(rounds) rounds in 3 s")
            print("invalidate while firing: \(rounds) rounds of an observer and a timer")
        }
    }

    @Test func cancellingDelayedPerformsAsTheyFireNeverCrashes() throws {
        try withWorker(options(.loop)) { worker in
            _ = try worker.addTimer(TimerSpec(interval: 0.0002))
            let seed = SplitMix.seed(
                "CANCEL_SEED", test: "InvalidateWhileFiringTests.cancellingDelayedPerformsAsTheyFireNeverCrashes")
            var generator = SplitMix(seed)
            let deadline = Monotonic.now() + 2
            var (rounds, ran, cancelled) = (0, 0, 0)
            while Monotonic.now() < deadline {
                _ = try worker.perform(PerformSpec(call: SelectorCall(selector: "count"), afterDelay: 0))
                // A random gap of up to 2 ms, spun: the cancel lands before,
                // during or after the timer's callout.
                let until = Monotonic.now() + Double.random(in: 0...0.002, using: &generator)
                while Monotonic.now() < until {}
                if worker.cancelDelayedPerforms(selector: "count").isEmpty { ran += 1 } else { cancelled += 1 }
                rounds += 1
            }
            #expect(ran > 0 && cancelled > 0, "\(ran) ran and \(cancelled) were cancelled: the gaps missed the fire")
            print("cancel while firing: \(rounds) delayed performs, \(ran) ran, \(cancelled) cancelled")
        }
    }
}
