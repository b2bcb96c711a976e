import Primitives
import Synchronization

/// The predictor's spending for one registry: item-steps spent by
/// requests and predictions given up (atomics, for `/metrics`), and the
/// steps all requests together may still spend (`bucket`, a leaf lock:
/// arithmetic only). Requests from many clients at once share the control
/// loop, so one request's budget does not bound them: the bucket refills
/// at `--max-predict-steps` a second, holds at most that many, and a
/// request is given what is in it (its overshoot is owed).
final class PredictCounters: Sendable {
    let steps = Atomic<Int>(0)
    let givenUp = Atomic<Int>(0)
    private let bucket = Locked((tokens: Double.nan, at: 0.0))

    init() {}

    /// Takes a request's budget out of the bucket: at most `perCall`, at
    /// least 1 (the play then stops after its first pass).
    func grant(_ perCall: Int, now: Double = Monotonic.now()) -> Int {
        bucket.withLock { b in
            let capacity = Double(perCall)
            let tokens = b.tokens.isNaN ? capacity : min(capacity, b.tokens + (now - b.at) * capacity)
            let given = max(1, Int(min(capacity, max(0, tokens))))
            b = (tokens - Double(given), now)
            return given
        }
    }

    /// Gives back what a request was granted and did not spend (negative:
    /// its overshoot, owed).
    func settle(granted: Int, spent: Int) {
        bucket.withLock { b in b.tokens += Double(granted - spent) }
    }
}

extension LoopDiagnostics {
    /// Item-steps the predictor spent for requests since start.
    public var predictSteps: Int { predict.steps.load(ordering: .relaxed) }
    /// Predictions given up since start because their budget ran out.
    public var predictionsGivenUp: Int { predict.givenUp.load(ordering: .relaxed) }
}

extension Worker {
    /// A budget for one request's predictions: `--max-predict-steps`, or
    /// what is left of the steps all requests may spend in this second.
    func requestBudget() -> PredictBudget {
        PredictBudget(steps: diagnostics.predict.grant(limits.maxPredictSteps))
    }

    /// Counts what a request's budget was spent on (after the play).
    func account(_ budget: PredictBudget) {
        diagnostics.predict.settle(granted: budget.steps, spent: budget.spent)
        diagnostics.predict.steps.add(budget.spent, ordering: .relaxed)
        if budget.ranOut { diagnostics.predict.givenUp.add(1, ordering: .relaxed) }
    }
}
