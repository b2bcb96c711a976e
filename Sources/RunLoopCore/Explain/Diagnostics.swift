import Foundation
import Primitives

/// How much the explainer records and when it warns; every bound is a flag
/// of `runloopd`.
public struct DiagnosticsOptions: Sendable, Hashable {
    /// Record turns, causes' details, utilisation and stalls (on by default).
    public var tracing = true
    /// Turns kept per worker (unless its creation asks for another size).
    public var turnRingSize = 256
    /// The most turns a worker may ask to keep (`turnRingSize` at creation).
    public var maxTurnRingSize = 16_384
    /// Callouts kept per turn (more are counted, not kept).
    public var maxCalloutsPerTurn = 16
    /// Stall thresholds in seconds: micro-hang, hang, severe (Matrix, Sentry
    /// and Datadog use 100, 250 and 500 ms).
    public var stallThresholds: [Double] = [0.1, 0.25, 0.5]
    /// A signalled source still unhandled this long on a sleeping loop is a
    /// lost wake-up.
    public var lostWakeupAfter = 0.5
    /// A perform pending this long on a loop that is not running is reported.
    public var idlePerformAfter = 0.5
    /// Work waiting this long in a mode the thread does not run is reported.
    public var modeNeverRunsAfter = 5.0
    /// A run at least this long with nothing in its mode that can wake it is reported.
    public var cannotWakeSeconds = 3600.0
    /// Utilisation above this over `busyWindow` is a busy loop.
    public var busyThreshold = 0.9
    /// The window (seconds) for utilisation and `busy_loop`.
    public var busyWindow = 10.0
    /// Warnings kept (oldest inactive ones are forgotten first).
    public var maxWarnings = 1024

    /// The defaults.
    public init() {}

    /// The stall severities' names, by threshold.
    public static let severities = ["micro", "hang", "severe"]
}

/// The explainer's shared parts for one registry: the options, the warning
/// table and the stall watchdog (one thread for all workers, started at the
/// first callout, asleep while no callout runs).
public final class LoopDiagnostics: Sendable {
    /// The options.
    public let options: DiagnosticsOptions
    /// Every warning.
    public let warnings: WarningTable
    let watchdog: Watchdog
    /// The loop budgets' counts (nested runs refused, livelocks).
    let nesting = NestingCounters()
    /// The predictor's spending (`--max-predict-steps`).
    let predict = PredictCounters()

    /// Creates the shared parts; `events` gets `warning` and `stall` events.
    public init(options: DiagnosticsOptions = DiagnosticsOptions(), events: @escaping @Sendable (RunLoopEvent) -> Void)
    {
        self.options = options
        self.warnings = WarningTable(capacity: options.maxWarnings, emit: events)
        self.watchdog = Watchdog(
            thresholds: options.stallThresholds, warnings: warnings, emit: events)
    }

    /// Stops the watchdog thread (the service's shutdown).
    public func shutdown() { watchdog.shutdown() }
}
