import Foundation
import Testing

@testable import RunLoopCore

/// The predictor's CPU budget per request (issue 37, `--max-predict-steps`):
/// `Limits.maxPredictSteps` is what every request's play is given, and the
/// registry counts the steps spent and the plays given up.
@Suite("Predict budget")
struct PredictBudgetTests {
    /// A manual thread with `count` timers every 100 µs, each with a fire
    /// limit (so fast-forward does not count them: every pass is played).
    private func loop(steps: Int, timers count: Int) throws -> (WorkerRegistry, Worker) {
        var limits = Limits()
        limits.maxPredictSteps = steps
        let (registry, _) = makeRegistry(limits)
        let worker = try registry.createWorker(options(.manual))
        for _ in 0..<count {
            var spec = TimerSpec(interval: 0.0001)
            spec.maxFires = 1_000_000
            _ = try worker.addTimer(spec)
        }
        return (registry, worker)
    }

    @Test("a request's prediction is given the limit's steps, and they are counted")
    func theLimitReachesTheRequest() throws {
        #expect(Limits().maxPredictSteps == PredictBudget.perCall)
        let (registry, worker) = try loop(steps: 1000, timers: 30)
        defer { registry.endAll() }
        let p = try worker.predict(mode: .default, seconds: 100, returnAfterSourceHandled: false)
        #expect(p.exitReason == nil && !p.certain)
        let givenUp = p.reasons.first { $0.contains("too long to play here") }
        #expect(givenUp != nil, "\(p.reasons)")
        // 1,000 steps: a pass over the 31 items (30 timers and the keep-alive
        // port) costs at least 31, so 33 passes at most.
        let played = givenUp.flatMap { Int($0.prefix { $0.isNumber }) }
        #expect(played.map { $0 <= 1000 / 31 + 1 } == true, "\(p.reasons)")
        #expect(registry.diagnostics.predictionsGivenUp == 1)
        let spent = registry.diagnostics.predictSteps
        // Overshot by at most one fire's scan of the 30 timers and one pass
        // over the 31 items (PredictBudgetBoundTests).
        #expect(spent >= 1000 && spent <= 1000 + 30 + 32, "\(spent)")
        // /why's predictions (one per mode) share one budget of the limit's.
        _ = worker.why()
        #expect(registry.diagnostics.predictionsGivenUp == 2)
        #expect(registry.diagnostics.predictSteps - spent <= 1000 + 30 + 32)
    }

    @Test("all requests together get the limit's steps a second, overshoot owed")
    func theBucket() {
        let bucket = PredictCounters()
        #expect(bucket.grant(1000, now: 10) == 1000)  // starts full
        bucket.settle(granted: 1000, spent: 1900)  // 900 owed
        #expect(bucket.grant(1000, now: 10) == 1)  // empty: one pass
        bucket.settle(granted: 1, spent: 301)
        // 1.5 s later: 1,500 came in, -1,201 were there (1 granted, 301 spent).
        #expect(bucket.grant(1000, now: 11.5) == 299)
        bucket.settle(granted: 299, spent: 100)
        // Much later: full again, and never more than the limit.
        #expect(bucket.grant(1000, now: 100) == 1000)
    }

    @Test("a small loop is still played to its end under a small budget")
    func aSmallLoopIsPlayedFully() throws {
        let (registry, worker) = try loop(steps: 1000, timers: 0)
        defer { registry.endAll() }
        var spec = TimerSpec(interval: 0.01)
        spec.maxFires = 3
        _ = try worker.addTimer(spec)
        let p = try worker.predict(mode: .default, seconds: 1, returnAfterSourceHandled: false)
        #expect(p.exitReason != nil, "\(p.reasons)")
        #expect(registry.diagnostics.predictionsGivenUp == 0)
        #expect(registry.diagnostics.predictSteps > 0 && registry.diagnostics.predictSteps < 1000)
    }
}
