import Dispatch
import Foundation
import Primitives
import Testing

@testable import RunLoopCore

/// The predict harness under load: a setup the machine kept from playing on
/// time is played again, never judged a disagreement.
@Suite struct PredictLoadTests {
    /// Issue 41: kept seed 7904189664028979504 (run seed
    /// 16784039527830686560, load 15–38) was judged a disagreement and replays
    /// clean on a quiet machine. Its run's one turn is a perform whose
    /// callout runs a nested run (75 ms); the run returns after it
    /// (handledSource). The nested run's exit event is recorded by the
    /// harness under its shared `runExits` lock, inside that callout: a
    /// harness thread holding the lock off the CPU kept the loop thread
    /// blocked (not runnable: no run-queue count shows it) and the run ended
    /// late. The harness counted the whole callout as the nested run's own
    /// time; it now counts only the nested run's duration, the rest of the
    /// callout is the turn's. Here the lock is held past the run's deadline.
    @Test func aCalloutBlockedAroundItsNestedRunIsNotJudged() throws {
        var harness = PredictHarness()
        let setup = PredictSetup.make(seed: 7_904_189_664_028_979_504)
        #expect(setup.stimuli.isEmpty && setup.calloutRun != nil && !setup.nested)
        let held = harness.runExits
        harness.beforeStimuli = { _ in
            // Another thread (another setup's harness thread) takes the lock
            // and is taken off the CPU for 150 ms, from the run's start: past
            // the nested run's end (75 ms) and the run's deadline (100 ms).
            let taken = Locked(false)
            Thread {
                held.withLock { _ in
                    taken.withLock { $0 = true }
                    taken.notifyAll()
                    _ = DispatchSemaphore(value: 0).wait(timeout: .now() + .milliseconds(150))
                }
            }.start()
            taken.withLock(when: { $0 }, timeout: 10) { _, _ in }
        }
        let problems = try harness.play(setup)
        #expect(problems == nil, "judged though its callout was kept from the CPU: \(problems ?? [])")
    }
}
