/// What a run will return, said before it runs (`Worker.predict`).
public struct Prediction: Sendable {
    /// One possible end of the run.
    public struct Outcome: Sendable {
        /// nil: the run does not return by itself (it sleeps until a stop,
        /// a wake-up, a perform queued or a timer added).
        public var exitReason: ExitReason?
        public var cause: ExitCause?
        /// Milliseconds from the start of the run.
        public var atMs: Double?
    }

    /// Where timing (or CF's set order among signalled version-0 sources
    /// of equal order) decides between outcomes that differ.
    public struct Race: Sendable {
        public var outcomes: [Outcome]
        /// What decides: each decision that, taken the other way, changes
        /// the answer.
        public var why: String
    }

    /// A turn the run will take: what wakes it and the callouts it makes.
    public struct Turn: Sendable, Hashable {
        public var wokeBy: WokeBy
        public var callouts: [CalloutRef]
        public var end: TurnEnd
    }

    /// The mode, seconds and flag of the predicted run.
    public var mode: String
    public var seconds: Double
    public var returnAfterSourceHandled: Bool
    /// The most likely end (the first of the race's outcomes when uncertain).
    public var outcome: Outcome
    /// `[lo, hi]` ms when timing decides when (not what) the run returns.
    public var windowMs: [Double]?
    public var certain: Bool
    public var race: Race?
    /// The reasons, in words.
    public var reasons: [String]
    /// The turns the run takes, in order (the last one ends with the run).
    public var turns: [Turn]
    /// The nested runs its callouts start (`runNested`), in the order they
    /// return, each predicted as a run of its own.
    public var nested: [Prediction] = []
    /// The deadline's timer fires, lowest and highest, when they depend on
    /// where in its repeating timers' periods the run begins (a run not
    /// under way: `Worker.widenByPhase`); nil when the count is one number.
    public var timerFiresRange: ClosedRange<Int>? = nil

    public var exitReason: ExitReason? { outcome.exitReason }
    public var cause: ExitCause? { outcome.cause }
    public var atMs: Double? { outcome.atMs }
}
