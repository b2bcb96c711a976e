import CoreFoundation
import Foundation
import Primitives
import Synchronization

/// What a user asks for when adding a timer.
public struct TimerSpec: Sendable {
    /// Seconds between fires (> 0); for a one-shot timer, the default delay.
    public var interval: Double
    /// Repeating (true) or one-shot.
    public var repeats: Bool
    /// Seconds before the first fire (default: `interval`).
    public var delay: Double?
    /// Stored and reported; CF on Linux arms its timerfd at the exact fire date
    /// and ignores it.
    public var tolerance: Double
    /// The mode (`.common` adds it to every common mode).
    public var mode: RunLoopMode
    /// A selector to run on every fire.
    public var action: SelectorCall?
    /// Invalidate after this many fires.
    public var maxFires: Int?
    /// Who added it.
    public var role: ItemRole = .user

    /// Creates a spec.
    public init(
        interval: Double, repeats: Bool = true, delay: Double? = nil, tolerance: Double = 0,
        mode: RunLoopMode = .default, action: SelectorCall? = nil, maxFires: Int? = nil
    ) {
        self.interval = interval
        self.repeats = repeats
        self.delay = delay
        self.tolerance = tolerance
        self.mode = mode
        self.action = action
        self.maxFires = maxFires
    }
}

/// How late a timer fired, in milliseconds (over a bounded window).
public struct Lateness: Sendable, Hashable {
    /// The last fire's lateness.
    public var lastMs: Double?
    /// Median over the window.
    public var p50Ms: Double?
    /// 99th percentile over the window.
    public var p99Ms: Double?
    /// Largest since the timer was created.
    public var maxMs: Double?
}

/// A timer as reported: configuration, fires, next fire date and lateness.
public struct TimerSnapshot: Sendable {
    /// Id (`tm1`, …; a delayed perform's timer has the perform's id).
    public var id: String
    /// Who added it.
    public var role: ItemRole
    /// Every mode it is in now (`CFRunLoopAddTimer` per mode).
    public var modes: [String]
    /// Seconds between fires.
    public var interval: Double
    /// Repeating or one-shot.
    public var repeats: Bool
    /// Initial delay in seconds.
    public var delay: Double
    /// Requested tolerance (ignored by CF on Linux).
    public var tolerance: Double
    /// Mode name.
    public var mode: String
    /// Whether the timer can still fire.
    public var valid: Bool
    /// Times fired.
    public var fires: Int
    /// Fire limit, if any.
    public var maxFires: Int?
    /// The next fire date, when valid.
    public var nextFireAt: Date?
    /// Lateness statistics.
    public var lateness: Lateness
    /// The action's selector, if any.
    public var action: SelectorCall?
    /// Failures of the action (the last one's message).
    public var lastActionError: String?
    /// When the timer was added.
    public var createdAt: Date
}

/// One `CFRunLoopTimer` on a worker, with its statistics.
///
/// Threads: fires on the worker's thread; read and invalidated from any
/// thread. Its statistics sit behind one `Locked`; the CF timer is set once;
/// whether it can still fire is an atomic flag (`isLive`), so the worker
/// reads it under its own lock without a CF call.
// @unchecked: the CF timer, set once in init, is a thread-safe CF object.
final class TimerRecord: @unchecked Sendable, ModeScheduled {
    let id: String
    let spec: TimerSpec
    let createdAt = Date()
    let firstFire: CFAbsoluteTime
    private(set) var timer: CFRunLoopTimer! = nil
    private struct Stats {
        var fires = 0
        var window: SampleWindow
        var lastActionError: String?
    }
    private let stats: Locked<Stats>
    /// False once the timer can no longer fire (set once, by `markInvalid`).
    private let live = Atomic<Bool>(true)
    /// The modes it is in.
    let modeSet: ItemModes
    private let onFire: @Sendable (TimerRecord, Int, Double) -> Void
    private let onInvalid: @Sendable (String) -> Void

    /// Creates the CF timer (not yet added to a loop). `onFire` runs on the loop's
    /// thread after the statistics are updated, with the fire count and the
    /// fire's lateness: how far behind the fire date CF had set it fired (s;
    /// past one interval, fires were skipped).
    /// `onInvalid` runs once, when the timer can no longer fire (one-shot fired,
    /// `maxFires` reached, or invalidated), with how it ended, so the owner can
    /// count live timers without scanning them.
    init(
        id: String, spec: TimerSpec, window: Int,
        onFire: @escaping @Sendable (TimerRecord, Int, Double) -> Void,
        onInvalid: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.id = id
        self.spec = spec
        self.stats = Locked(Stats(window: SampleWindow(capacity: window)))
        self.modeSet = ItemModes(spec.mode.name)
        self.onFire = onFire
        self.onInvalid = onInvalid
        let delay = spec.delay ?? spec.interval
        self.firstFire = CFAbsoluteTimeGetCurrent() + delay
        let interval = spec.repeats ? spec.interval : 0
        // A C callout with this record as an info CF does not own, as
        // ObserverRecord does (there a block was freed under its callout).
        // A timer's block would be safe: `__CFRunLoopDoTimer` retains the
        // info through the context's `retain` around the callout, and
        // CFRunLoopTimerInvalidate's release comes after. The worker's book
        // keeps the record until it is invalid.
        var context = CFRunLoopTimerContext(
            version: 0, info: Unmanaged.passUnretained(self).toOpaque(), retain: nil, release: nil,
            copyDescription: nil)
        self.timer = CFRunLoopTimerCreate(
            kCFAllocatorDefault, firstFire, interval, 0, 0,
            { _, info in
                guard let info else { return }
                Unmanaged<TimerRecord>.fromOpaque(info).takeUnretainedValue().fired()
            }, &context)
        CFRunLoopTimerSetTolerance(timer, spec.tolerance)
    }

    private func fired() {
        // Inside the callout CF still holds the fire date it is firing: a
        // point of the timer's grid (first + k·interval), the first one
        // missed when fires were skipped. Lateness, `timer_behind` and the
        // load's timer lag are all measured from it (docs/explain.md).
        let due = CFRunLoopTimerGetNextFireDate(timer)
        let now = CFAbsoluteTimeGetCurrent()
        let lateness = max(0, now - due)
        let count = stats.withLock { s in
            s.fires += 1
            s.window.add(lateness * 1000)
            return s.fires
        }
        let reachedMax = spec.maxFires.map { count >= $0 } ?? false
        if reachedMax {
            invalidate(how: "was invalidated after its last fire (maxFires \(count))")
        } else if !spec.repeats {
            // CF invalidates a one-shot timer after this callout.
            markInvalid(how: "fired once (CF invalidates a one-shot timer after its fire)")
        }
        onFire(self, count, lateness)
    }

    /// Records the failure of the timer's action.
    func recordActionError(_ message: String?) {
        stats.withLock { $0.lastActionError = message }
    }

    /// `CFRunLoopTimerInvalidate` (idempotent).
    func invalidate(how: String = "was invalidated") {
        markInvalid(how: how)
        CFRunLoopTimerInvalidate(timer)
    }

    /// Reports the end of the timer's life once.
    private func markInvalid(how: String) {
        if live.exchange(false, ordering: .acquiringAndReleasing) { onInvalid(how) }
    }

    var isValid: Bool { CFRunLoopTimerIsValid(timer) }

    /// Whether the timer can still fire, as this record knows it (false from
    /// the moment its last fire or its invalidation is reported): no CF call,
    /// so it may be read under any lock.
    var isLive: Bool { live.load(ordering: .acquiring) }

    var snapshot: TimerSnapshot {
        let valid = CFRunLoopTimerIsValid(timer)
        let next = valid ? Date(timeIntervalSinceReferenceDate: CFRunLoopTimerGetNextFireDate(timer)) : nil
        // The modes first: `ItemModes` has a lock of its own, never taken under this one.
        let modes = modeSet.all
        // Built under the lock, like every snapshot: no copy of the window escapes it.
        return stats.withLock { s in
            TimerSnapshot(
                id: id, role: spec.role, modes: modes, interval: spec.interval, repeats: spec.repeats,
                delay: spec.delay ?? spec.interval,
                tolerance: spec.tolerance, mode: spec.mode.name, valid: valid, fires: s.fires, maxFires: spec.maxFires,
                nextFireAt: next,
                lateness: Lateness(
                    lastMs: s.window.last, p50Ms: s.window.percentile(0.5), p99Ms: s.window.percentile(0.99),
                    maxMs: s.window.maximum),
                action: spec.action, lastActionError: s.lastActionError, createdAt: createdAt)
        }
    }
}
