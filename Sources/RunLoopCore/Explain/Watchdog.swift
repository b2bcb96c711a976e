import CLinux
import Foundation
import Primitives

/// A stall: a callout that has run past the first threshold and is still
/// running (or has just ended).
public struct Stall: Sendable, Hashable {
    /// Id (`st1`, …), unique in the registry.
    public var id: String
    /// The thread.
    public var thread: String
    /// The callout.
    public var callout: CalloutRef
    /// `micro`, `hang` or `severe`: the highest threshold crossed so far.
    public var severity: String
    /// How long the callout had run when this was seen, in milliseconds.
    public var ms: Double
}

/// What happened to a stall (the `change` of a `stall` event).
public enum StallChange: String, Sendable, Hashable {
    /// The callout crossed the first threshold.
    case began
    /// It crossed a higher threshold.
    case escalated
}

/// One thread that sees every worker's callout in flight and reports the
/// ones that run past the stall thresholds while they still run.
///
/// Cost on a worker: `begin` and `end` take one lock and store a few words;
/// `begin` signals the watchdog only when it sleeps without a deadline or
/// would look later than the new callout's first threshold. The watchdog
/// wakes at the next threshold any in-flight callout can cross (at most one
/// first-threshold apart while callouts keep beginning), and once nothing
/// began since its last look it sleeps until the next `begin`: an idle
/// service never wakes it.
///
/// Threads: `register`, `begin`, `end`, `unregister` on workers' threads;
/// the scan on the watchdog's own (detached) thread; one `Locked` for all.
final class Watchdog: Sendable {
    private struct Slot {
        var thread: String
        var callout: CalloutRef?
        var since: Double = 0
        var stall: Stall?
        var level = -1
    }
    private struct State {
        var slots: [Slot?] = []
        var free: [Int] = []
        /// The watchdog sleeps without a deadline until a `begin` sets `kick`.
        var idle = true
        var kick = false
        var started = false
        var stopped = false
        var stallSeq = 0
        var begins = 0
        var seenBegins = 0
        /// When the watchdog wakes next (monotonic), while not idle.
        var wakeAt = 0.0
    }
    private let state = Locked(State())
    private let thresholds: [Double]
    private let warnings: WarningTable
    private let emit: @Sendable (RunLoopEvent) -> Void

    init(thresholds: [Double], warnings: WarningTable, emit: @escaping @Sendable (RunLoopEvent) -> Void) {
        self.thresholds = thresholds.isEmpty ? [0.1] : thresholds.sorted()
        self.warnings = warnings
        self.emit = emit
    }

    /// A slot for one worker's callouts.
    func register(thread: String) -> Int {
        state.withLock { s in
            let slot = Slot(thread: thread)
            if let index = s.free.popLast() {
                s.slots[index] = slot
                return index
            }
            s.slots.append(slot)
            return s.slots.count - 1
        }
    }

    /// The worker ended.
    func unregister(_ index: Int) {
        state.withLock { s in
            guard index < s.slots.count, s.slots[index] != nil else { return }
            s.slots[index] = nil
            s.free.append(index)
        }
    }

    /// A callout began on the worker of `index` (or resumed, after a nested run).
    func begin(_ index: Int, _ callout: CalloutRef, at now: Double) {
        let (signal, start) = state.withLock { s -> (Bool, Bool) in
            guard index < s.slots.count, s.slots[index] != nil else { return (false, false) }
            s.slots[index]!.callout = callout
            s.slots[index]!.since = now
            s.slots[index]!.stall = nil
            s.slots[index]!.level = -1
            s.begins &+= 1
            let start = !s.started && !s.stopped
            if start { s.started = true }
            // Signal only a watchdog that would otherwise look too late.
            guard s.idle || now + thresholds[0] < s.wakeAt else { return (false, start) }
            s.idle = false
            s.kick = true
            return (true, start)
        }
        if start { startThread() }
        if signal { state.notifyAll() }
    }

    /// The worker's callout ended (or paused for a nested run): returns the
    /// stall it caused, if any, with its final duration.
    func end(_ index: Int, at now: Double) -> Stall? {
        state.withLock { s -> Stall? in
            guard index < s.slots.count, s.slots[index] != nil else { return nil }
            defer {
                s.slots[index]!.callout = nil
                s.slots[index]!.stall = nil
            }
            guard var stall = s.slots[index]!.stall else { return nil }
            stall.ms = (now - s.slots[index]!.since) * 1000
            return stall
        }
    }

    /// The callout under way on the worker of `index`, and since when.
    func current(_ index: Int) -> (callout: CalloutRef, since: Double)? {
        state.withLock { s in
            guard index < s.slots.count, let slot = s.slots[index], let callout = slot.callout else { return nil }
            return (callout, slot.since)
        }
    }

    func shutdown() {
        state.withLock { $0.stopped = true }
        state.notifyAll()
    }

    private func startThread() {
        do {
            try LoopThread.spawn { [self] in
                // Nobody joins the watchdog: it ends on `shutdown` (the service's
                // stop, or its registry going away) and frees itself.
                pthread_detach(pthread_self())
                _ = "runloopd-watch".withCString { clinux_set_thread_name($0) }
                run()
            }
        } catch {
            state.withLock { $0.started = false }
        }
    }

    private func run() {
        var wait: Double? = nil
        while true {
            let step: ([(Stall, StallChange)], Double?)?
            if let wait {
                step = state.withLock(when: { $0.stopped || $0.kick }, timeout: wait) { s, _ in scanAndPlan(&s) }
            } else {
                step = state.withLock(when: { $0.stopped || $0.kick }) { s in scanAndPlan(&s) }
            }
            guard let (found, next) = step else { return }
            wait = next
            for (stall, change) in found { report(stall, change) }
        }
    }

    /// Under the lock: the stalls that crossed a threshold since the last
    /// scan, and how long to sleep (nil: until kicked). Nil when stopped.
    private func scanAndPlan(_ s: inout State) -> ([(Stall, StallChange)], Double?)? {
        if s.stopped { return nil }
        s.kick = false
        let now = Monotonic.now()
        var found: [(Stall, StallChange)] = []
        var next: Double? = nil
        var inFlight = false
        for index in s.slots.indices {
            guard let slot = s.slots[index], let callout = slot.callout else { continue }
            inFlight = true
            let elapsed = now - slot.since
            let level = thresholds.lastIndex { elapsed >= $0 } ?? -1
            if level > slot.level {
                let change: StallChange = slot.stall == nil ? .began : .escalated
                if slot.stall == nil { s.stallSeq += 1 }
                let stall = Stall(
                    id: slot.stall?.id ?? "st\(s.stallSeq)", thread: slot.thread, callout: callout,
                    severity: Self.severity(level), ms: elapsed * 1000)
                s.slots[index]!.stall = stall
                s.slots[index]!.level = level
                found.append((stall, change))
            }
            if level + 1 < thresholds.count {
                let due = slot.since + thresholds[level + 1] - now
                next = min(next ?? due, due)
            }
        }
        // Nothing to watch and nothing began since the last look: sleep until
        // the next `begin`. Otherwise look again at the next threshold, or
        // one first-threshold later (callouts that begin meanwhile do not
        // signal, so a busy loop costs at most one wake per threshold).
        if !inFlight && s.begins == s.seenBegins {
            s.idle = true
            return (found, nil)
        }
        s.seenBegins = s.begins
        s.idle = false
        let wait = max(0.001, next ?? thresholds[0])
        s.wakeAt = now + wait
        return (found, wait)
    }

    private func report(_ stall: Stall, _ change: StallChange) {
        emit(.stall(stall, change: change))
        warn(stall, running: true, counts: change == .began)
    }

    /// The stall has ended: its event, and the warning's final sentence.
    func ended(_ stall: Stall) {
        emit(.stallEnded(stall))
        warn(stall, running: false, counts: false)
        warnings.resolve(.stall, thread: stall.thread, subject: stall.callout.id)
    }

    /// The stall's warning, raised or brought up to date; its sentence says
    /// whether the callout still runs.
    private func warn(_ stall: Stall, running: Bool, counts: Bool) {
        warnings.raise(
            .stall, severity: stall.severity, thread: stall.thread, subjects: [stall.callout.id],
            message: Self.message(stall, running: running),
            details: [
                "stall": .string(stall.id), "kind": .string(stall.callout.kind.rawValue),
                "selector": stall.callout.selector.map(Value.string) ?? .null, "ms": .number(stall.ms.rounded()),
            ], counts: counts)
    }

    static func severity(_ level: Int) -> String {
        let names = DiagnosticsOptions.severities
        return names[min(max(level, 0), names.count - 1)]
    }

    static func message(_ stall: Stall, running: Bool) -> String {
        let what =
            "\(stall.callout.kind.rawValue) \(stall.callout.id)"
            + (stall.callout.selector.map { " (selector \($0))" } ?? "")
        let ms = Int(stall.ms.rounded())
        return running
            ? "\(what) has blocked the loop of \(stall.thread) for \(ms) ms (\(stall.severity))"
            : "\(what) blocked the loop of \(stall.thread) for \(ms) ms (\(stall.severity))"
    }
}
