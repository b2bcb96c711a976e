import CoreFoundation
import Foundation
import Primitives

/// The explainer on a worker, read from any thread (under the lock): turns,
/// load, warnings.
extension Worker {
    // MARK: - Reading

    /// Turns with a number above `since`, oldest first, at most `limit`.
    public func turns(since: Int = 0, limit: Int = .max) -> (turns: [TurnRecord], last: Int, capacity: Int) {
        let page = turns(matching: TurnFilter(), since: since, limit: limit)
        return (page.turns, page.last, page.capacity)
    }

    /// The turns in the ring that match `filter`, with a number above
    /// `since`, oldest first, at most `limit`; with the ring's size, the last
    /// turn number and how many turns the ring has forgotten.
    public func turns(matching filter: TurnFilter, since: Int = 0, limit: Int = .max) -> TurnPage {
        // The Deque is copied on write: taking it under the lock is O(1).
        let (all, capacity, dropped) = book.withLock { b in
            (b.turns.count == 0 ? nil : b.turns.elements, b.turns.capacity, b.turns.dropped)
        }
        var kept: [TurnRecord] = []
        for turn in all ?? [] where turn.turn > since && filter.matches(turn) {
            guard kept.count < limit else { break }
            kept.append(turn)
        }
        return TurnPage(turns: kept, last: all?.last?.turn ?? 0, capacity: capacity, dropped: dropped)
    }

    /// Load now: sums, the busy share over the part of the window the thread
    /// existed in and over its life (the turn under way included), lag and
    /// dispatch statistics.
    public func load() -> LoadSnapshot {
        book.withLock { b in
            let now = Monotonic.now()
            let openBusy = b.turnSince.map { (now - $0) * 1000 } ?? 0
            let openSlept = b.asleepSince.map { (now - $0) * 1000 } ?? 0
            let recent = b.utilization.busyShare(now: now, openBusyMs: openBusy)
            var stats = b.load
            stats.busyMs += openBusy
            stats.sleptMs += openSlept
            return LoadSnapshot(
                stats: stats, utilization: recent.ratio, window: diagnostics.options.busyWindow,
                coveredSeconds: recent.existed,
                lifetimeUtilization: b.utilization.lifetimeShare(busyMs: stats.busyMs, now: now))
        }
    }

    /// The thread's last run exits (`RunExit`), oldest first: at most
    /// `WorkerBook.keptExits`, kept after the thread ends, for its timeline.
    public func recentExits() -> [RunExit] { book.withLock { $0.recentExits.items } }

    /// This worker's warnings.
    public func warnings() -> [LoopWarning] { diagnostics.warnings.list(thread: id) }
}

/// Which turns to read: every condition given must hold.
public struct TurnFilter: Sendable, Hashable {
    /// What woke the turn.
    public var wokeBy: WakeKind?
    /// A callout of this kind ran in the turn.
    public var calloutKind: CalloutKind?
    /// A callout of this object (`tm1`, `s2`, `p7`, …) ran in the turn.
    public var calloutId: String?
    /// The turn belongs to this run (`RunExit.run`).
    public var run: Int?
    /// The turn began at or after this date (compared to the millisecond, as shown).
    public var from: Date?
    /// The turn began at or before this date (compared to the millisecond, as shown).
    public var to: Date?

    /// A filter (every condition optional).
    public init(
        wokeBy: WakeKind? = nil, calloutKind: CalloutKind? = nil, calloutId: String? = nil, run: Int? = nil,
        from: Date? = nil, to: Date? = nil
    ) {
        self.wokeBy = wokeBy
        self.calloutKind = calloutKind
        self.calloutId = calloutId
        self.run = run
        self.from = from
        self.to = to
    }

    /// Whether `turn` matches. Only the callouts the turn kept are looked at
    /// (`droppedCallouts` are counted, not kept).
    public func matches(_ turn: TurnRecord) -> Bool {
        if let wokeBy, turn.wokeBy.kind != wokeBy { return false }
        if let run, turn.run != run { return false }
        if calloutKind != nil || calloutId != nil {
            let hit = turn.callouts.contains { c in
                (calloutKind.map { c.ref.kind == $0 } ?? true) && (calloutId.map { c.ref.id == $0 } ?? true)
            }
            if !hit { return false }
        }
        let ms = Self.millis(turn.startedAt)
        if let from, ms < Self.millis(from) { return false }
        if let to, ms > Self.millis(to) { return false }
        return true
    }

    private static func millis(_ date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
    }
}

/// One read of a worker's turns.
public struct TurnPage: Sendable {
    /// The matching turns, oldest first.
    public var turns: [TurnRecord]
    /// The number of the last turn recorded (0 before any).
    public var last: Int
    /// How many turns the ring keeps.
    public var capacity: Int
    /// Turns the ring has forgotten to make room, since the thread began.
    public var dropped: Int
}

/// A worker's load as read: the sums and the recent utilisation.
public struct LoadSnapshot: Sendable, Hashable {
    /// Sums since the worker started.
    public var stats: LoadStats
    /// Busy share (time in turns: callouts and CF's own work while awake)
    /// of the part of the last `window` seconds during which the thread
    /// existed (nil when it existed none of it).
    public var utilization: Double?
    /// The window, in seconds.
    public var window: Double
    /// The part of the window the thread existed in, in seconds: what
    /// `utilization` is measured over (less than `window` for a thread made,
    /// or ended, within it).
    public var coveredSeconds: Double = 0
    /// Busy share over the thread's whole life, to now or to its end.
    public var lifetimeUtilization: Double?
}
