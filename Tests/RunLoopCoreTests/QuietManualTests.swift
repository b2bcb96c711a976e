import Foundation
import RunLoopTestSupport
import Testing

@testable import RunLoopCore

/// Quiet where nothing is wrong (issue 39): a manual thread that nobody ran
/// while its repeating timer came due raises no `timer_behind` when it is
/// finally run (its lateness is still measured); the same lateness built up
/// while the loop ran in another mode does warn (ExplainTests).
@Suite("Quiet manual threads")
struct QuietManualTests {
    @Test func aTimerDueWhileNobodyRanTheLoopIsNotBehind() throws {
        try withWorker(options(.manual)) { worker in
            let timer = try worker.addTimer(TimerSpec(interval: 0.05, repeats: true, maxFires: 1))
            // Nobody runs the thread until its timer is 0.25 s overdue (a condition with a deadline).
            let overdue = waitUntil(timeout: 10) {
                guard let next = try? worker.timerSnapshot(timer.id).nextFireAt else { return false }
                return Date().timeIntervalSince(next) > 0.25
            }
            #expect(overdue)
            #expect(try worker.runAndWait(seconds: 0.12).reason == .timedOut)
            let snapshot = try worker.timerSnapshot(timer.id)
            #expect(snapshot.fires == 1)
            #expect((snapshot.lateness.maxMs ?? 0) >= 240, "the lateness is still measured")
            #expect(worker.warnings().first { $0.code == "timer_behind" } == nil)
        }
    }
}
