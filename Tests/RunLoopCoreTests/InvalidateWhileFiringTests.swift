import Foundation
import RunLoopTestSupport
import Testing

@testable import RunLoopCore

/// An observer or a timer invalidated from another thread while its callout
/// runs on the loop's thread (a DELETE as it fires). CF releases a block's
/// context at once when it invalidates, even mid-callout: the predict
/// differential once crashed there (a call to a freed block's code pointer,
/// 0x3, from `__CFRunLoopDoObservers`). Observers and timers now call a C
/// function whose info CF does not own. This hammers the window: a loop
/// turning every 0.2 ms, each observer and timer invalidated as soon as it
/// fired once. It passes by not crashing the test process.
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
}
