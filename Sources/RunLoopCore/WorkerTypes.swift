import CoreFoundation
import Foundation

/// What keeps an otherwise empty loop alive.
public enum KeepAlive: String, Sendable, CaseIterable, Hashable {
    /// A port source on an eventfd runloopd never writes: the loop has
    /// something to wait on and never wakes for it (the NSMachPort trick),
    /// unless a message is sent to it through the API.
    case port
    /// A repeating dummy timer (one fire a day): polling in disguise.
    case timer
    /// Nothing: an empty mode makes CF return `finished` at once.
    case none
}

/// How a worker runs its loop. Every style records every exit.
public enum RunStyle: String, Sendable, CaseIterable, Hashable {
    /// runloopd's managed loop: `while !cancelled { CFRunLoopRunInMode(mode,
    /// seconds, returnAfterSourceHandled) }` (seconds default: distant
    /// future); a stop ends one run and the loop re-enters; an empty mode parks.
    case loop
    /// CF's `CFRunLoopRun()`: runs the default mode until stopped or finished,
    /// then the thread ends.
    case forever
    /// Runs only when asked (`Worker.run`), one run per request.
    case manual
    /// `-[NSRunLoop run]`: `runMode:NSDefaultRunLoopMode beforeDate:distantFuture`
    /// (a `CFRunLoopRunInMode(default, distant future, true)`) again and again
    /// until one returns finished: a stop ends only the current pass. Then the
    /// thread ends.
    case run
    /// `-[NSRunLoop runUntilDate:]`: the same passes until `seconds` have passed
    /// (or a pass finishes). Then the thread ends.
    case runUntilDate
    /// One `-[NSRunLoop runMode:beforeDate:]`: `CFRunLoopRunInMode(mode, seconds,
    /// true)` once. Then the thread ends.
    case runModeOnce

    /// Whether the thread ends when its style's runs are over.
    public var endsThread: Bool { self != .loop && self != .manual }

    /// Whether its runs are always in the default mode.
    public var defaultModeOnly: Bool { self == .forever || self == .run || self == .runUntilDate }

    /// The Cocoa or CF call it mirrors, for messages.
    public var cocoaName: String {
        switch self {
        case .loop: "CFRunLoopRunInMode in a loop"
        case .forever: "CFRunLoopRun()"
        case .manual: "CFRunLoopRunInMode on request"
        case .run: "-[NSRunLoop run]"
        case .runUntilDate: "-[NSRunLoop runUntilDate:]"
        case .runModeOnce: "-[NSRunLoop runMode:beforeDate:]"
        }
    }
}

/// A worker's run policy.
public struct RunPolicy: Sendable, Hashable {
    /// The style.
    public var style: RunStyle
    /// The mode runs use (forever: always default).
    public var mode: RunLoopMode
    /// Seconds per `CFRunLoopRunInMode` call (loop, runModeOnce), or in all
    /// (runUntilDate); `distantFuture` by default, as the articles wait.
    public var seconds: Double
    /// The `returnAfterSourceHandled` flag (loop style).
    public var returnAfterSourceHandled: Bool

    /// `[NSDate distantFuture]` as a run's seconds (what `CFRunLoopRun` passes).
    public static let distantFuture = 1.0e10

    /// The mode the style runs in, where a keep-alive goes.
    public var keepAliveMode: RunLoopMode { style.defaultModeOnly ? .default : mode }

    /// Whether `seconds` is the distant future.
    public var isDistantFuture: Bool { seconds >= RunPolicy.distantFuture }

    /// Creates a policy (defaults: loop, default mode, distant future, false).
    public init(
        style: RunStyle = .loop, mode: RunLoopMode = .default, seconds: Double = RunPolicy.distantFuture,
        returnAfterSourceHandled: Bool = false
    ) {
        self.style = style
        self.mode = mode
        self.seconds = seconds
        self.returnAfterSourceHandled = returnAfterSourceHandled
    }
}

/// How to create a worker.
public struct WorkerOptions: Sendable, Hashable {
    /// A name for people (the Linux thread name keeps its first 15 bytes).
    public var name: String?
    /// What keeps the loop alive.
    public var keepAlive: KeepAlive
    /// How it runs.
    public var policy: RunPolicy
    /// Turns its ring keeps (nil: the registry's `turnRingSize`; at most
    /// its `maxTurnRingSize`).
    public var turnRingSize: Int?

    /// Creates options (defaults: port keep-alive, loop style).
    public init(
        name: String? = nil, keepAlive: KeepAlive = .port, policy: RunPolicy = RunPolicy(), turnRingSize: Int? = nil
    ) {
        self.name = name
        self.keepAlive = keepAlive
        self.policy = policy
        self.turnRingSize = turnRingSize
    }
}

/// Where a worker is, as seen from another thread.
public enum WorkerState: String, Sendable, Hashable {
    /// Inside a run and busy (handling sources, timers, performs).
    case running
    /// Inside a run, asleep in epoll (`CFRunLoopIsWaiting`).
    case waiting
    /// Between runs (manual workers waiting for a request, parked loop workers).
    case idle
    /// The thread has ended.
    case exited
}

/// A set of run-loop activities with CF's own raw values
/// (`CFRunLoopActivity`), as an observer's mask.
public struct Activities: OptionSet, Sendable, Hashable {
    public let rawValue: CFOptionFlags
    public init(rawValue: CFOptionFlags) { self.rawValue = rawValue }

    /// `kCFRunLoopEntry`.
    public static let entry = Activities(rawValue: 1 << 0)
    /// `kCFRunLoopBeforeTimers`.
    public static let beforeTimers = Activities(rawValue: 1 << 1)
    /// `kCFRunLoopBeforeSources`.
    public static let beforeSources = Activities(rawValue: 1 << 2)
    /// `kCFRunLoopBeforeWaiting`.
    public static let beforeWaiting = Activities(rawValue: 1 << 5)
    /// `kCFRunLoopAfterWaiting`.
    public static let afterWaiting = Activities(rawValue: 1 << 6)
    /// `kCFRunLoopExit`.
    public static let exit = Activities(rawValue: 1 << 7)

    /// The set holding one activity.
    public init(_ activity: Activity) {
        switch activity {
        case .entry: self = .entry
        case .beforeTimers: self = .beforeTimers
        case .beforeSources: self = .beforeSources
        case .beforeWaiting: self = .beforeWaiting
        case .afterWaiting: self = .afterWaiting
        case .exit: self = .exit
        }
    }

    /// The set of `activities`.
    public init(_ activities: [Activity]) {
        self = activities.reduce(into: Activities()) { $0.insert(Activities($1)) }
    }
}

/// One recorded activity in a worker's ring.
public struct ActivityRecord: Sendable, Hashable {
    /// Increasing per worker, never reused.
    public var seq: UInt64
    /// When it happened.
    public var at: Date
    /// Which activity.
    public var activity: Activity
    /// The mode the loop was running in.
    public var mode: String
    /// The observer that saw it.
    public var observer: String
}

/// The modes of a worker's loop.
public struct ModesSnapshot: Sendable, Hashable {
    /// Every mode CF knows for the loop (`CFRunLoopCopyAllModes`).
    public var all: [String]
    /// The common-modes set (default plus every `addCommonMode`).
    public var common: [String]
    /// The mode of the innermost run under way, if any.
    public var current: String?
}

/// A pending (queued, not yet run) perform as listed on a worker.
public struct PerformSnapshot: Sendable, Hashable {
    /// Id (`p1`, …).
    public var id: String
    /// The selector and arguments.
    public var call: SelectorCall
    /// The modes it may run in.
    public var modes: [String]
    /// When it was queued.
    public var queuedAt: Date
    /// Its delay, for `afterDelay` performs (0 otherwise).
    public var afterDelay: Double
    /// When a delayed perform is due.
    public var fireAt: Date?
    /// Carried by a one-shot timer (`afterDelay` given, even 0).
    public var delayed: Bool
    /// How it reaches the loop: the selector path or a block.
    public var via: PerformVia = .selector
}

/// Where a perform is in its life.
public enum PerformState: String, Sendable, Hashable, CaseIterable {
    /// Its `afterDelay` timer has not fired.
    case delayed
    /// Queued for its modes, waiting for the loop to run in one of them.
    case pending
    /// Its selector is running now.
    case running
    /// It ran and returned a value.
    case done
    /// It ran and failed, or could never run (its thread ended).
    case failed
    /// It was cancelled before its delay passed.
    case cancelled
}

/// A perform as followed by id (`GET /api/threads/{id}/performs/{pid}`).
public struct PerformStatus: Sendable {
    /// Id (`p1`, …).
    public var id: String
    /// The selector.
    public var selector: String
    /// Where it is.
    public var state: PerformState
    /// The answer, once it has one (done, failed, cancelled).
    public var outcome: Result<Value, RunLoopError>?
    /// Milliseconds between queueing and the start of the run.
    public var queuedMs: Double?
    /// Milliseconds the selector ran.
    public var ranMs: Double?
    /// When it was answered.
    public var finishedAt: Date?
    /// A delayed perform's fire date (nil otherwise): past it, still delayed, it is overdue.
    public var fireAt: Date? = nil
}

/// A consistent view of a worker, readable from any thread.
public struct WorkerSnapshot: Sendable {
    /// Id (`t1`, …).
    public var id: String
    /// The requested name.
    public var name: String
    /// The Linux thread name (at most 15 bytes).
    public var threadName: String
    /// Whether the thread name had to be truncated.
    public var threadNameTruncated: Bool
    /// State now.
    public var state: WorkerState
    /// The mode of the innermost run under way.
    public var currentMode: String?
    /// Nesting depth of runs under way (0 = none).
    public var depth: Int
    /// The keep-alive.
    public var keepAlive: KeepAlive
    /// The run policy.
    public var policy: RunPolicy
    /// Runs completed (nested included).
    public var runs: Int
    /// Exit counts per reason.
    public var exits: [ExitReason: Int]
    /// The last run's exit.
    public var lastExit: RunExit?
    /// A loop worker whose mode was empty (CF said `finished`) sleeps until
    /// something is added: `true` while it sleeps so.
    public var parked: Bool
    /// Valid timers.
    public var timers: Int
    /// Timer fires over the thread's life (removed timers' included).
    public var timerFires: Int = 0
    /// Valid user sources.
    public var sources: Int
    /// The id of the keep-alive port source or timer (listed with role keepAlive).
    public var keepAliveItem: String?
    /// Valid user observers.
    public var observers: Int
    /// Tasks in the idle queue.
    public var tasks: Int
    /// Performs queued and not yet run.
    public var pendingPerforms: [PerformSnapshot]
    /// When the worker was created.
    public var createdAt: Date
    /// When the thread ended.
    public var endedAt: Date?
    /// Whether `end` was asked.
    public var ending: Bool
    /// Who asked it to end (nil: nobody, or its run style ended it).
    public var endOrigin: StopOrigin? = nil
    /// The most stack (bytes) the thread had in use when one of its runs began.
    public var stackUsedBytes = 0
    /// The stack the thread was made with (bytes; 0 before it started).
    public var stackBytes = 0
    /// The deepest its runs were nested.
    public var depthMax = 0
    /// Whether it is livelocked now (CPU in nested runs past its budget).
    public var livelocked = false
}
