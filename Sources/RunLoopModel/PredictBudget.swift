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
    package var left: Int

    /// A budget of `steps` item-steps (at least 1).
    public init(steps: Int = PredictBudget.perCall) {
        self.steps = max(1, steps)
        left = self.steps
    }

    /// Item-steps spent so far. The budget is checked after each pass and
    /// before each timer fire, so it overshoots by at most one fire's scan
    /// of the timers and one pass over the items (`PredictBudgetTests`).
    public var spent: Int { steps - left }
    /// Whether the budget ran out: a play was given up.
    public var ranOut: Bool { left <= 0 }
}
