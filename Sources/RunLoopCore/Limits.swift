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
