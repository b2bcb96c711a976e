import Primitives
import Synchronization

/// How much playing one call of the predictor may do, in item-steps (a
/// pass over a loop of n timers, sources and observers costs n + 1): a
/// loop of hundreds of items woken every 100 µs would otherwise hold the
/// control loop for seconds. A class: the plays of one call share it.
public final class PredictBudget {
    /// Item-steps per call by default (`--max-predict-steps`): about 0.2 s
    /// of a debug build on this kind of machine, a tenth of it in release
    /// (a 2,700-pass play of 367 items took 0.36 s in debug for 1,000,000).
    public static let perCall = 500_000
    /// The steps this call was given.
    public let steps: Int
    var left: Int

    /// A budget of `steps` item-steps (at least 1).
    public init(steps: Int = PredictBudget.perCall) {
        self.steps = max(1, steps)
        left = self.steps
    }

    /// Item-steps spent so far (the last pass may overshoot the budget).
    public var spent: Int { steps - left }
    /// Whether the budget ran out: a play was given up.
    public var ranOut: Bool { left <= 0 }
}

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
