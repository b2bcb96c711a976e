import Foundation

/// Running sums of a worker's load: busy and asleep time (event-loop
/// utilisation as Node defines it), delivery lag (timer lateness, perform
/// queue wait) and dispatch time (how long callouts ran), kept apart as
/// Android's Looper keeps them.
public struct LoadStats: Sendable, Hashable {
    /// A running statistic in milliseconds.
    public struct Stat: Sendable, Hashable {
        /// Samples.
        public var count = 0
        /// The last sample.
        public var last: Double?
        /// Their sum.
        public var sum = 0.0
        /// The largest.
        public var max: Double?

        /// The mean, when there are samples.
        public var mean: Double? { count == 0 ? nil : sum / Double(count) }

        mutating func add(_ value: Double) {
            count += 1
            last = value
            sum += value
            max = Swift.max(max ?? value, value)
        }

        mutating func merge(_ other: Stat) {
            guard other.count > 0 else { return }
            count += other.count
            last = other.last
            sum += other.sum
            max = Swift.max(max ?? other.max!, other.max!)
        }
    }

    /// Turns recorded.
    public var turns = 0
    /// Time spent in turns (CF's work and callouts), ms.
    public var busyMs = 0.0
    /// Time spent asleep in epoll, ms.
    public var sleptMs = 0.0
    /// How long callouts ran.
    public var dispatch = Stat()
    /// How late timers fired.
    public var timerLag = Stat()
    /// How long performs waited in their queue.
    public var performLag = Stat()
    /// Turns by what woke them.
    public var wakeups: [WakeKind: Int] = [:]

    /// Busy share of busy + asleep time since the worker started (nil before any).
    public var lifetimeUtilization: Double? {
        let total = busyMs + sleptMs
        return total > 0 ? busyMs / total : nil
    }
}

/// Busy and asleep time over a sliding window, in ten slices, and when the
/// thread began and ended (monotonic): what its busy share is measured over.
struct UtilizationWindow {
    private var slices: [(start: Double, busy: Double, slept: Double)] = []
    let window: Double
    /// When the thread began (its worker was made).
    let since: Double
    /// When the thread ended (nil while it lives).
    var until: Double?

    init(window: Double, since: Double = Monotonic.now()) {
        self.window = max(0.01, window)
        self.since = since
    }

    /// The busy share of the part of the window during which the thread
    /// existed: busy time in the window (`openBusyMs`, the turn under way,
    /// included) over that part, and that part in seconds. A thread that is
    /// not running a run is neither busy nor asleep, yet it exists: a manual
    /// thread run once for 0.7 ms in ten seconds is busy 0.007 %, not 100 %
    /// (busy / (busy + asleep), which `utilization` gives `busy_loop`). Nil
    /// when the thread existed none of the window.
    func busyShare(now: Double, openBusyMs: Double = 0) -> (ratio: Double?, existed: Double) {
        let existed = max(0, min(now, until ?? now) - max(since, now - window))
        guard existed > 0 else { return (nil, 0) }
        var busy = openBusyMs
        for slice in slices where now - slice.start <= window { busy += slice.busy }
        return (min(1, busy / (existed * 1000)), existed)
    }

    /// Busy share over the thread's whole life (nil before it has lived a moment).
    func lifetimeShare(busyMs: Double, now: Double) -> Double? {
        let lived = (until ?? now) - since
        return lived > 0 ? min(1, busyMs / (lived * 1000)) : nil
    }

    mutating func add(busyMs: Double, sleptMs: Double, at now: Double) {
        let width = window / 10
        if let last = slices.last, now - last.start < width {
            slices[slices.count - 1].busy += busyMs
            slices[slices.count - 1].slept += sleptMs
        } else {
            slices.append((now, busyMs, sleptMs))
        }
        while let first = slices.first, now - first.start > window { slices.removeFirst() }
    }

    /// The share of busy time in the window, plus `openBusy` / `openSlept`
    /// (the turn or sleep under way), and how much of the window it covers.
    func utilization(now: Double, openBusyMs: Double = 0, openSleptMs: Double = 0) -> (
        ratio: Double?, coveredMs: Double
    ) {
        var busy = openBusyMs
        var slept = openSleptMs
        for slice in slices where now - slice.start <= window {
            busy += slice.busy
            slept += slice.slept
        }
        let total = busy + slept
        return (total > 0 ? min(1, busy / total) : nil, total)
    }
}

/// The record of turns as they happen, kept by the worker's own thread
/// (observers, callouts and runs all run there), so it needs no lock. Closed
/// turns are handed to the worker, which files them under its lock.
// @unchecked: its mutable state is touched only on the worker's own thread.
final class LoopTracer: @unchecked Sendable {
    struct OpenTurn {
        var number: Int
        var startedMono: Double
        var startedAt: Date
        var sleptMs: Double
        var afterWake: Bool
        var wokeBy: WokeBy?
        var callouts: [Callout] = []
        var dropped = 0
    }

    struct OpenRun {
        var seq: Int
        var mode: String
        var depth: Int
        var timerFires = 0
        var lastSource: CalloutRef?
        /// Sources and performs handled since the loop last woke (or the run
        /// began): with `returnAfterSourceHandled`, the pass that ends the run.
        var passSources: [CalloutRef] = []
        var passSourcesDropped = 0
        var stopBy: StopOrigin?
        var turn: OpenTurn?
        /// CF has returned from `__CFRunLoopRun` and is notifying `exit`: a
        /// stop now sets a flag CF drops with the run's per-run record.
        var exiting = false
    }

    /// What a run left when it returned.
    struct RunSummary {
        var timerFires: Int
        var lastSource: CalloutRef?
        var passSources: [CalloutRef] = []
        var passSourcesDropped = 0
        var stopBy: StopOrigin?
        var turn: TurnRecord?
    }

    private(set) var runs: [OpenRun] = []
    private(set) var callouts: [(ref: CalloutRef, start: Double)] = []
    private var sleepStart: Double?
    private var turnSeq = 0
    private let maxCallouts: Int
    /// Dispatch and lag samples since the last closed turn.
    var pending = LoadStats()

    init(maxCallouts: Int) { self.maxCallouts = max(0, maxCallouts) }

    /// Handled sources a run's cause lists (more are counted).
    static let maxPassSources = 64

    /// The callout under way, if any.
    var currentCallout: CalloutRef? { callouts.last?.ref }

    func beginRun(seq: Int, mode: String, depth: Int, at now: Double) {
        var run = OpenRun(seq: seq, mode: mode, depth: depth)
        run.turn = openTurn(at: now, sleptMs: 0, afterWake: false)
        runs.append(run)
    }

    func endRun(reason: ExitReason, at now: Double) -> RunSummary {
        guard var run = runs.popLast() else { return RunSummary(timerFires: 0) }
        var closed: TurnRecord?
        if var turn = run.turn {
            if turn.afterWake && turn.wokeBy == nil {
                turn.wokeBy = WokeBy(kind: reason == .timedOut ? .timeout : .wakeup)
            }
            closed = close(turn, of: run, end: .exit, at: now)
            run.turn = nil
        }
        return RunSummary(
            timerFires: run.timerFires, lastSource: run.lastSource, passSources: run.passSources,
            passSourcesDropped: run.passSourcesDropped, stopBy: run.stopBy, turn: closed)
    }

    /// `afterWaiting`: a new turn begins.
    func woke(at now: Double) {
        guard !runs.isEmpty else { return }
        let slept = sleepStart.map { max(0, now - $0) * 1000 } ?? 0
        sleepStart = nil
        runs[runs.count - 1].turn = openTurn(at: now, sleptMs: slept, afterWake: true)
        runs[runs.count - 1].passSources.removeAll(keepingCapacity: true)
        runs[runs.count - 1].passSourcesDropped = 0
    }

    /// `beforeWaiting`: the turn under way ends; returns it.
    func sleeping(at now: Double) -> TurnRecord? {
        sleepStart = now
        guard let run = runs.last, var turn = run.turn else { return nil }
        if turn.afterWake && turn.wokeBy == nil { turn.wokeBy = WokeBy(kind: .wakeup) }
        runs[runs.count - 1].turn = nil
        return close(turn, of: run, end: .sleep, at: now)
    }

    func calloutBegan(_ ref: CalloutRef, at now: Double) {
        callouts.append((ref, now))
        guard !runs.isEmpty, var turn = runs[runs.count - 1].turn, turn.afterWake, turn.wokeBy == nil else { return }
        // Observers (a user's `afterWaiting` one runs before any timer) and idle
        // tasks (at `beforeWaiting`) never woke the loop: the next callout says.
        let kind: WakeKind
        switch ref.kind {
        case .timer: kind = .timer
        case .source: kind = .source
        case .port: kind = .port
        case .perform: kind = .perform
        case .task, .observer: return
        }
        turn.wokeBy = WokeBy(kind: kind, id: ref.id)
        runs[runs.count - 1].turn = turn
    }

    /// The innermost callout ended; returns how long it ran (ms).
    @discardableResult
    func calloutEnded(at now: Double) -> Double {
        guard let (ref, start) = callouts.popLast() else { return 0 }
        let ms = (now - start) * 1000
        pending.dispatch.add(ms)
        guard !runs.isEmpty else { return ms }
        let index = runs.count - 1
        if ref.kind == .timer || ref.throughTimer { runs[index].timerFires += 1 }
        if ref.countsAsSource {
            runs[index].lastSource = ref
            if runs[index].passSources.count < Self.maxPassSources {
                runs[index].passSources.append(ref)
            } else {
                runs[index].passSourcesDropped += 1
            }
        }
        if runs[index].turn != nil {
            if runs[index].turn!.callouts.count < maxCallouts {
                runs[index].turn!.callouts.append(Callout(ref: ref, ms: ms))
            } else {
                runs[index].turn!.dropped += 1
            }
        }
        return ms
    }

    /// The `stop` selector ran inside the innermost run's current callout.
    func stopSelectorRan() {
        guard !runs.isEmpty, !runs[runs.count - 1].exiting else { return }
        runs[runs.count - 1].stopBy = .selector(callout: currentCallout)
    }

    /// The innermost run's `exit` observers are being called: its end is
    /// decided, and no stop made now caused it.
    func exitBegan() {
        guard !runs.isEmpty else { return }
        runs[runs.count - 1].exiting = true
    }

    private func openTurn(at now: Double, sleptMs: Double, afterWake: Bool) -> OpenTurn {
        turnSeq += 1
        return OpenTurn(
            number: turnSeq, startedMono: now, startedAt: Date(), sleptMs: sleptMs, afterWake: afterWake,
            wokeBy: afterWake ? nil : WokeBy(kind: .none))
    }

    private func close(_ turn: OpenTurn, of run: OpenRun, end: TurnEnd, at now: Double) -> TurnRecord {
        TurnRecord(
            turn: turn.number, run: run.seq, depth: run.depth, mode: run.mode, startedAt: turn.startedAt,
            wokeBy: turn.wokeBy ?? WokeBy(kind: .none), sleptMs: turn.sleptMs,
            busyMs: max(0, now - turn.startedMono) * 1000, callouts: turn.callouts, droppedCallouts: turn.dropped,
            end: end)
    }
}
