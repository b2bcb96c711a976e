import FoundationEssentials

/// Why one `CFRunLoopRunInMode` call returned: the four `CFRunLoopRunResult`s.
///
/// The value is always the one CF returned; runloopd never infers it.
public enum ExitReason: Int32, Sendable, CaseIterable, Hashable {
    /// `kCFRunLoopRunFinished` (1): the mode had no sources or timers left.
    case finished = 1
    /// `kCFRunLoopRunStopped` (2): `CFRunLoopStop` ended the run.
    case stopped = 2
    /// `kCFRunLoopRunTimedOut` (3): the run's `seconds` passed.
    case timedOut = 3
    /// `kCFRunLoopRunHandledSource` (4): a source was handled and the run was
    /// asked to return after one.
    case handledSource = 4

    /// The name users see (`"finished"`, `"stopped"`, `"timedOut"`, `"handledSource"`).
    public var name: String {
        switch self {
        case .finished: return "finished"
        case .stopped: return "stopped"
        case .timedOut: return "timedOut"
        case .handledSource: return "handledSource"
        }
    }

    /// The numeric `CFRunLoopRunResult` code (1…4).
    public var code: Int { Int(rawValue) }

    /// Parses a name as produced by `name`.
    public init?(name: String) {
        guard let match = ExitReason.allCases.first(where: { $0.name == name }) else { return nil }
        self = match
    }
}

/// The record of one finished run: what CF returned, in which mode, and how long it took.
public struct RunExit: Sendable, Hashable {
    /// The reason CF returned.
    public var reason: ExitReason
    /// The mode the run used (`"default"`, or a custom name).
    public var mode: String
    /// Wall time spent inside the call, in seconds (monotonic clock).
    public var duration: Double
    /// When the run returned.
    public var endedAt: Date
    /// The worker's run number (1 for its first run, nested runs included).
    public var run: Int
    /// Nesting depth: 0 for a top-level run, 1 for a run started inside a run, …
    public var depth: Int
    /// Why, beyond the reason: what was handled, which deadline, who stopped
    /// it, what emptied the mode.
    public var cause: ExitCause?

    /// Creates a record.
    public init(
        reason: ExitReason, mode: String, duration: Double, endedAt: Date, run: Int, depth: Int,
        cause: ExitCause? = nil
    ) {
        self.cause = cause
        self.reason = reason
        self.mode = mode
        self.duration = duration
        self.endedAt = endedAt
        self.run = run
        self.depth = depth
    }
}
