/// Every bound the engine enforces, as named defaults a caller can change.
public struct Limits: Sendable, Hashable {
    /// Workers alive at once (the control loop not counted).
    public var maxWorkers = 64
    /// Timers per worker (valid ones; invalidated timers do not count).
    public var maxTimersPerWorker = 256
    /// User sources per worker.
    public var maxSourcesPerWorker = 64
    /// User observers per worker.
    public var maxObserversPerWorker = 32
    /// Performs queued on one worker and not yet run.
    public var maxQueuedCommands = 1024
    /// Entries kept in each worker's activity ring.
    public var activityRingSize = 1024
    /// Lateness samples kept per timer for p50 / p99.
    public var latenessWindow = 1024
    /// Lines kept in each worker's `log`.
    public var logRingSize = 256
    /// Messages kept (received) and queued (pending) per port source.
    public var portQueueSize = 1024
    /// Bytes of `data` in one port message.
    public var maxMessageBytes = 4096
    /// Idle tasks per worker (the queue's capacity).
    public var taskCapacity = 10
    /// Largest `seconds`, interval or delay accepted. CF waits forever past
    /// about 5e8 s, on `inf` and on NaN, so every duration is bounded.
    public var maxSeconds: Double = 86_400
    /// Longest `sleep` selector, in milliseconds.
    public var maxSleepMillis = 10_000
    /// Longest `spin` selector, in microseconds.
    public var maxSpinMicros = 1_000_000
    /// Longest thread name accepted (the Linux thread name shows the first 15 bytes).
    public var maxNameLength = 64
    /// Retired (exited) workers remembered for `GET` after they end.
    public var retainedExitedWorkers = 64
    /// Answered performs each worker remembers for `GET …/performs/{pid}`.
    public var performHistory = 64
    /// Runs under way at once on one thread, the outermost included: a
    /// `runNested` that would make more is refused before CF starts it
    /// (`nesting_limit`). Each level costs stack (docs/budgets.md gives the
    /// measured figures), and a worker's stack is sized for this many.
    public var maxNesting = 128
    /// CPU seconds a thread may spend inside nested runs before it is back
    /// in its outermost run: past it the thread is livelocked (a `livelock`
    /// warning), its nested runs are stopped and new ones refused until its
    /// loop sleeps or its outermost run returns.
    public var maxNestCPUSeconds: Double = 2
    /// Item-steps one request's predictions may play (`/predict`, `/why`):
    /// past it the play is given up (`exitReason` null, not certain). All
    /// requests together get as many a second.
    public var maxPredictSteps = PredictBudget.perCall

    /// Stack reserved per nesting level: 9x what one level was measured to
    /// use in a release build (7.0-7.3 KB), 5x in a debug build (11.5-12.1
    /// KB); docs/budgets.md.
    public static let stackBytesPerLevel = 64 * 1024
    /// Stack for the thread's outermost run and what its callouts call.
    public static let stackBaseBytes = 2 * 1024 * 1024
    /// A nested run is refused when less than this much stack is left,
    /// whatever its depth (a second guard behind `maxNesting`).
    public static let stackReserveBytes = 512 * 1024

    /// The stack a worker thread is made with: room for `maxNesting` levels.
    public var threadStackBytes: Int { Self.stackBaseBytes + max(1, maxNesting) * Self.stackBytesPerLevel }

    /// The defaults.
    public init() {}

    /// Validates a duration in seconds: finite, within `0...maxSeconds`
    /// (`> 0` when `positive`).
    public func checkSeconds(_ value: Double, field: String, positive: Bool = false) throws(RunLoopError) {
        guard value.isFinite else {
            throw .badValue(field, "\(field) must be a finite number of seconds")
        }
        if positive ? value <= 0 : value < 0 {
            throw .badValue(field, "\(field) must be \(positive ? "> 0" : ">= 0") seconds")
        }
        guard value <= maxSeconds else {
            throw .badValue(field, "\(field) must be <= \(maxSeconds) seconds (the configured maximum)")
        }
    }
}
