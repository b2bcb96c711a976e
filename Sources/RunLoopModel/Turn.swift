import FoundationEssentials

/// What kind of code a loop called out to.
public enum CalloutKind: String, Sendable, CaseIterable, Hashable {
    /// A timer's fire (and its action).
    case timer
    /// A custom (version-0) source's perform routine (and its action).
    case source
    /// A port (version-1) source's message (and its action).
    case port
    /// A perform's selector (through its mode's custom source, or its delay timer).
    case perform
    /// An idle task (run by the task queue's `beforeWaiting` observer).
    case task
    /// A user observer's callout.
    case observer
}

/// One callout in flight or done: what, which object, which selector.
public struct CalloutRef: Sendable, Hashable {
    /// The kind.
    public var kind: CalloutKind
    /// The object's id (`tm1`, `s2`, `p7`, `ob1`, a task id).
    public var id: String
    /// The selector it runs, if any.
    public var selector: String?
    /// A delayed perform fires from a timer: CF counts it as a timer, never as
    /// a handled source.
    package var throughTimer = false
    /// A block perform (`CFRunLoopPerformBlock`): CF runs it in
    /// `__CFRunLoopDoBlocks` and never counts it as a handled source.
    package var viaBlock = false

    /// Creates a reference.
    public init(kind: CalloutKind, id: String, selector: String? = nil) {
        self.kind = kind
        self.id = id
        self.selector = selector
    }

    /// Whether CF counts it as a handled source (`returnAfterSourceHandled`).
    package var countsAsSource: Bool {
        switch kind {
        case .source, .port: return true
        case .perform: return !throughTimer && !viaBlock
        case .timer, .task, .observer: return false
        }
    }
}

/// A callout that ran during a turn, with its duration.
public struct Callout: Sendable, Hashable {
    /// What ran.
    public var ref: CalloutRef
    /// How long it ran, in milliseconds.
    public var ms: Double

    package init(ref: CalloutRef, ms: Double) {
        self.ref = ref
        self.ms = ms
    }
}

/// What woke a turn, inferred from the first callout after `afterWaiting`.
public enum WakeKind: String, Sendable, CaseIterable, Hashable {
    /// A timer fired (CF's timer descriptor).
    case timer
    /// A custom source was signalled (and the loop woken).
    case source
    /// A port source's descriptor became readable.
    case port
    /// A perform's source or delay timer.
    case perform
    /// `CFRunLoopWakeUp` with nothing to handle (a wake-up, or a stop's wake-up).
    case wakeup
    /// The run's own deadline.
    case timeout
    /// The turn did not follow a sleep (the first turn of a run).
    case none
}

/// What woke a turn and, when it was an object, which one.
public struct WokeBy: Sendable, Hashable {
    /// The kind.
    public var kind: WakeKind
    /// The object's id, when one woke the loop.
    public var id: String?

    package init(kind: WakeKind, id: String? = nil) {
        self.kind = kind
        self.id = id
    }
}

/// How a turn ended.
public enum TurnEnd: String, Sendable, Hashable {
    /// The loop went to sleep (`beforeWaiting`).
    case sleep
    /// The run returned.
    case exit
}

/// One turn of a run: from waking (or the run's entry) to the next sleep (or
/// the run's return). CF may make several passes without sleeping (it polls
/// again after handling a source); they belong to the same turn.
public struct TurnRecord: Sendable, Hashable {
    /// The worker's turn number (1, 2, …), never reused.
    public var turn: Int
    /// The run it belongs to (`RunExit.run`).
    public var run: Int
    /// The run's nesting depth.
    public var depth: Int
    /// The run's mode.
    public var mode: String
    /// When the turn began.
    public var startedAt: Date
    /// What woke it.
    public var wokeBy: WokeBy
    /// How long the loop slept before it (0 for a run's first turn).
    public var sleptMs: Double
    /// How long the turn took, callouts and CF's own work included.
    public var busyMs: Double
    /// The callouts it made, in order (at most the configured number).
    public var callouts: [Callout]
    /// Callouts beyond that number (counted, not kept).
    public var droppedCallouts: Int
    /// How it ended.
    public var end: TurnEnd

    package init(
        turn: Int, run: Int, depth: Int, mode: String, startedAt: Date, wokeBy: WokeBy, sleptMs: Double,
        busyMs: Double, callouts: [Callout], droppedCallouts: Int, end: TurnEnd
    ) {
        self.turn = turn
        self.run = run
        self.depth = depth
        self.mode = mode
        self.startedAt = startedAt
        self.wokeBy = wokeBy
        self.sleptMs = sleptMs
        self.busyMs = busyMs
        self.callouts = callouts
        self.droppedCallouts = droppedCallouts
        self.end = end
    }
}
