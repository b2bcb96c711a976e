import CoreFoundation
import Foundation
import Primitives

/// The explainer on a worker: turns and their callouts, exit causes, load,
/// warnings, and what keeps the loop alive. The tracing half runs on the
/// worker's own thread (observers, callouts, runs); readers take the lock.
extension Worker {
    // MARK: - Turns (worker's thread)

    /// Runs `body` as a callout of the loop: timed, filed under the turn under
    /// way, and watched for stalls while it runs.
    func callout<T>(_ ref: CalloutRef, _ body: () -> T) -> T {
        LockCheck.assertNoneHeld("a run-loop callout")
        guard let slot = watchSlot else {
            tracer.calloutBegan(ref, at: 0)
            defer { tracer.calloutEnded(at: 0) }
            return body()
        }
        let start = Monotonic.now()
        tracer.calloutBegan(ref, at: start)
        diagnostics.watchdog.begin(slot, ref, at: start)
        let result = body()
        let end = Monotonic.now()
        let stall = diagnostics.watchdog.end(slot, at: end)
        tracer.calloutEnded(at: end)
        if let stall { diagnostics.watchdog.ended(stall) }
        return result
    }

    /// A run begins: its first turn opens; a callout that started it (a
    /// nested run) stops being watched, since the loop turns again.
    func runBegins(seq: Int, mode: String, depth: Int, at now: Double, cannotWake: Bool) {
        if let slot = watchSlot, depth > 0, tracer.currentCallout != nil,
            let stall = diagnostics.watchdog.end(slot, at: now)
        {
            diagnostics.watchdog.ended(stall)
        }
        tracer.beginRun(seq: seq, mode: mode, depth: depth, at: watchSlot == nil ? 0 : now)
        if warned.load(ordering: .relaxed) > 0,
            openWarnings.withLock({ keys in keys.contains { $0.hasPrefix("mode_never_runs|") } })
        {
            let resolved = diagnostics.warnings.resolve("mode_never_runs", thread: id) {
                $0.details["mode"]?.string == mode
            }
            forget(resolved.map { Self.warningKey($0.code, $0.subjects) })
        }
        if cannotWake {
            let seconds = book.withLock { $0.runStack.last?.seconds ?? 0 }
            warn(
                "loop_cannot_wake", severity: "info", subjects: [mode],
                message:
                    "\(id) waits in \(mode) for \(ExitCause.seconds(seconds)) with nothing in the mode that can wake it: only a stop, a wake-up, or a perform, source or timer added later will",
                details: ["mode": .string(mode), "seconds": .number(seconds)])
        }
    }

    /// The run returned: its last turn closes; the callout that started it
    /// (a nested run) is watched again.
    func runEnds(reason: ExitReason, at now: Double) -> LoopTracer.RunSummary {
        var summary = tracer.endRun(reason: reason, at: watchSlot == nil ? 0 : now)
        if watchSlot == nil { summary.turn = nil }
        if let slot = watchSlot, let outer = tracer.currentCallout {
            diagnostics.watchdog.begin(slot, outer, at: now)
        }
        return summary
    }

    /// `afterWaiting` (first observer): a turn begins.
    func loopWoke() {
        let now = Monotonic.now()
        tracer.woke(at: now)
        book.withLock { b in
            b.asleepSince = nil
            b.turnSince = now
        }
    }

    /// `beforeWaiting` (last observer): the turn ends.
    func loopSleeps() {
        let now = Monotonic.now()
        guard let turn = tracer.sleeping(at: now) else { return }
        publish(turn, at: now, asleep: true)
    }

    /// Files a closed turn: ring, load sums, utilisation window; then the
    /// `turn` event, and `busy_loop` when utilisation crosses its threshold.
    func publish(_ turn: TurnRecord, at now: Double, asleep: Bool = false) {
        let delta = tracer.pending
        tracer.pending = LoadStats()
        let options = diagnostics.options
        let busy: (ratio: Double, changed: Bool)? = book.withLock { b in
            b.turns.append(turn)
            b.load.turns += 1
            b.load.busyMs += turn.busyMs
            b.load.sleptMs += turn.sleptMs
            b.load.dispatch.merge(delta.dispatch)
            b.load.timerLag.merge(delta.timerLag)
            b.load.performLag.merge(delta.performLag)
            b.load.wakeups[turn.wokeBy.kind, default: 0] += 1
            b.utilization.add(busyMs: turn.busyMs, sleptMs: turn.sleptMs, at: now)
            b.turnSince = nil
            b.asleepSince = asleep ? now : nil
            let (ratio, covered) = b.utilization.utilization(now: now)
            guard let ratio, covered >= options.busyWindow * 900 else { return nil }
            let isBusy = ratio > options.busyThreshold
            defer { b.busyLoop = isBusy }
            return (ratio, isBusy != b.busyLoop)
        }
        emit(.turn(thread: id, turn: turn))
        guard let busy, busy.changed else { return }
        if busy.ratio > options.busyThreshold {
            warn(
                "busy_loop", severity: "warning", subjects: [id],
                message:
                    "\(id) was busy \(Int((busy.ratio * 100).rounded())) % of the last \(ExitCause.seconds(options.busyWindow)): it hardly sleeps",
                details: ["utilization": .number((busy.ratio * 1000).rounded() / 1000)])
            later(options.busyWindow) { $0.recheckBusy() }
        } else {
            unwarn("busy_loop", subject: id)
        }
    }

    /// What holds the loop now, in words (nil when no callout runs, or with
    /// tracing off): why a stop or a run's end has not come back.
    public func busyDescription() -> String? {
        guard let slot = watchSlot, let (callout, since) = diagnostics.watchdog.current(slot) else { return nil }
        let seconds = Monotonic.now() - since
        return "\(callout.kind.rawValue) \(callout.id)"
            + (callout.selector.map { " (selector \($0))" } ?? "")
            + " has been running on \(id) for \(ExitCause.seconds(seconds)); CF returns from the run only after it returns"
    }

    /// A busy loop that has since fallen asleep closes no turn until it wakes
    /// (a run may wait for the distant future): count the sleep under way and
    /// end `busy_loop` once the window is quiet; look again while it is not.
    func recheckBusy() {
        let options = diagnostics.options
        let now = Monotonic.now()
        let quiet: Bool? = book.withLock { b in
            guard b.busyLoop else { return nil }
            guard let asleep = b.asleepSince else { return false }
            let (ratio, _) = b.utilization.utilization(now: now, openSleptMs: (now - asleep) * 1000)
            guard let ratio, ratio <= options.busyThreshold else { return false }
            b.busyLoop = false
            return true
        }
        switch quiet {
        case true?: unwarn("busy_loop", subject: id)
        case false?: later(options.busyWindow) { $0.recheckBusy() }
        case nil: break
        }
    }

    /// The `stop` selector ran on this thread (the innermost run's callout).
    func stopSelectorRan() {
        let own = book.withLock { $0.thread }
        guard let own, pthread_equal(pthread_self(), own) != 0 else { return }
        tracer.stopSelectorRan()
    }

    // MARK: - Warnings

    /// Raises a warning about this worker.
    func warn(_ code: String, severity: String, subjects: [String], message: String, details: [String: Value] = [:]) {
        let key = Self.warningKey(code, subjects)
        openWarnings.withLock { keys in
            keys.insert(key)
            warned.store(keys.count, ordering: .relaxed)
        }
        diagnostics.warnings.raise(
            code, severity: severity, thread: id, subjects: subjects, message: message, details: details)
    }

    /// Resolves this worker's warning `code` about `subject` (any subject when
    /// nil). Free when the worker has no open warning; a set lookup otherwise.
    func unwarn(_ code: String, subject: String? = nil) {
        guard warned.load(ordering: .relaxed) > 0 else { return }
        let open = openWarnings.withLock { keys -> Bool in
            let matching =
                subject.map { keys.contains(Self.warningKey(code, [$0])) ? [Self.warningKey(code, [$0])] : [] }
                ?? keys.filter { $0.hasPrefix(code + "|") }
            guard !matching.isEmpty else { return false }
            keys.subtract(matching)
            warned.store(keys.count, ordering: .relaxed)
            return true
        }
        if open { diagnostics.warnings.resolve(code, thread: id, subject: subject) }
    }

    private func forget(_ keys: [String]) {
        guard !keys.isEmpty else { return }
        openWarnings.withLock { open in
            open.subtract(keys)
            warned.store(open.count, ordering: .relaxed)
        }
    }

    static func warningKey(_ code: String, _ subjects: [String]) -> String {
        code + "|" + subjects.joined(separator: ",")
    }

    /// Checks `check` after `seconds` (on a background queue), if the worker lives.
    func later(_ seconds: Double, _ check: @escaping @Sendable (Worker) -> Void) {
        Deadlines.after(seconds) { [weak self] in
            guard let self, !self.hasExited else { return }
            check(self)
        }
    }

    /// A mode named close to one of CF's (`NSDefaultRunloopMode`, `defualt`):
    /// `mode_misnamed`, once per mode, so the hint is seen wherever the name
    /// was used (an item added, a perform queued, a run).
    func noteMode(_ mode: RunLoopMode) {
        guard let suggestion = mode.suggestion, let hint = mode.hint else { return }
        warn(
            "mode_misnamed", severity: "warning", subjects: [mode.name], message: hint,
            details: ["mode": .string(mode.name), "didYouMean": .string(suggestion)])
    }

    /// Schedules the `mode_never_runs` check for work waiting in `modes` (a
    /// signalled source, a queued perform, a timer due in `dueIn` seconds):
    /// `stillWaiting` tells, at the check, whether the work still waits.
    func watchModes(
        _ modes: [String], item: String, kind: String, dueIn: Double = 0,
        stillWaiting: @escaping @Sendable (Worker) -> Bool
    ) {
        let after = diagnostics.options.modeNeverRunsAfter
        let added = Monotonic.now()
        let running = book.withLock { b -> Bool in
            guard let current = b.runStack.last?.mode else { return false }
            return b.expand(modes).contains(current)
        }
        guard !running else { return }
        let waited = max(0, dueIn) + after
        later(waited) { worker in
            guard stillWaiting(worker) else { return }
            let (expanded, ran) = worker.book.withLock { b -> ([String], Bool) in
                let expanded = b.expand(modes)
                let ran = expanded.contains { (b.modeEntered[$0] ?? -1) >= added || b.runStack.last?.mode == $0 }
                return (expanded, ran)
            }
            guard !ran, let mode = expanded.first else { return }
            worker.warn(
                "mode_never_runs", severity: "warning", subjects: [item],
                message:
                    "\(kind) \(item) waits in \(expanded.joined(separator: ", ")), which \(worker.id) has not run for \(ExitCause.seconds(waited)); it runs only when the loop runs in one of those modes",
                details: ["mode": .string(mode), "modes": .array(expanded.map(Value.string))])
        }
    }

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

    /// Load now: sums, the recent utilisation (the turn or sleep under way
    /// included), lag and dispatch statistics.
    public func load() -> LoadSnapshot {
        book.withLock { b in
            let now = Monotonic.now()
            let openBusy = b.turnSince.map { (now - $0) * 1000 } ?? 0
            let openSlept = b.asleepSince.map { (now - $0) * 1000 } ?? 0
            let recent = b.utilization.utilization(now: now, openBusyMs: openBusy, openSleptMs: openSlept)
            var stats = b.load
            stats.busyMs += openBusy
            stats.sleptMs += openSlept
            return LoadSnapshot(stats: stats, utilization: recent.ratio, window: diagnostics.options.busyWindow)
        }
    }

    /// This worker's warnings.
    public func warnings() -> [LoopWarning] { diagnostics.warnings.list(thread: id) }
}

/// Where a queued perform landed (see `WorkerBook.placement`).
enum PerformPlacement {
    case idle
    case runningInMode
    case runningElsewhere
}

/// A worker's load as read: the sums and the recent utilisation.
public struct LoadSnapshot: Sendable, Hashable {
    /// Sums since the worker started.
    public var stats: LoadStats
    /// Busy share over the last `window` seconds (nil before any turn).
    public var utilization: Double?
    /// The window, in seconds.
    public var window: Double
}

extension WorkerBook {
    /// Where a perform for `modes` lands: on a loop that is not running, on
    /// a run in one of its modes (the usual case: nothing to watch), or on a
    /// run in another mode. No allocation on the usual path.
    func placement(of modes: [RunLoopMode]) -> PerformPlacement {
        guard let current = runStack.last?.mode else { return .idle }
        let inMode = modes.contains { $0.name == current || ($0.isCommon && commonModes.contains(current)) }
        return inMode ? .runningInMode : .runningElsewhere
    }

    /// `modes` with `common` replaced by the common modes.
    func expand(_ modes: [String]) -> [String] {
        var out: [String] = []
        for mode in modes {
            for name in mode == "common" ? commonModes : [mode] where !out.contains(name) { out.append(name) }
        }
        return out
    }

    /// What the loop holds, copied out for questions asked after the lock.
    var contents: LoopContents {
        LoopContents(timers: timers.all, sources: sources.all, performs: performs.queued, commonModes: commonModes)
    }

    /// The cause of a run's exit, by CF's precedence.
    func cause(
        of reason: ExitReason, frame: RunFrame, summary: LoopTracer.RunSummary, cancelled: Bool, since: Double
    ) -> ExitCause {
        switch reason {
        case .handledSource:
            return .sourceHandled(
                summary.lastSource, pass: summary.passSources, more: summary.passSourcesDropped)
        case .timedOut:
            return .deadline(seconds: frame.seconds, timerFires: summary.timerFires)
        case .stopped:
            if cancelled, let endOrigin { return .stop(endOrigin) }
            return .stop(frame.stopOrigin ?? summary.stopBy)
        case .finished:
            let filled =
                everFilled.contains(frame.mode) || (everFilled.contains("common") && commonModes.contains(frame.mode))
            let cause: ExitCause
            if filled {
                let removal = lastRemoval[frame.mode].flatMap { $0.mono >= since ? $0 : nil }
                cause = .modeEmpty(frame.mode, emptiedBy: removal)
            } else {
                cause = .modeMissing(frame.mode)
            }
            return cause.hinting(frame.mode)
        }
    }

    /// Records what may have emptied `mode` (`common`: every common mode).
    mutating func removed(_ kind: String, _ id: String, how: String, from mode: String) {
        let removal = Removal(kind: kind, id: id, how: how, mono: Monotonic.now())
        for name in expand([mode]) { lastRemoval[name] = removal }
    }

    /// Something was added to `mode`.
    mutating func filled(_ mode: String) { everFilled.insert(mode) }
}

/// What a loop holds, copied out of the book (references and names only):
/// its questions ask the records themselves (CF validity, each record's
/// modes behind their own lock), so they are asked after the book's lock.
struct LoopContents {
    var timers: [TimerRecord]
    var sources: [UserSource]
    var performs: [PerformRequest]
    var commonModes: [String]

    /// Whether the keep-alive port is in `mode`.
    func holdsKeepAlivePort(in mode: String) -> Bool {
        sources.contains { $0.spec.role == .keepAlive && $0.isValid && $0.isIn(mode, common: commonModes) }
    }

    /// Whether `mode` holds nothing that keeps a run in it from finishing
    /// (no valid source, keep-alive included, no valid timer, no perform).
    func isEmpty(_ mode: String) -> Bool {
        let inMode: (String) -> Bool = { $0 == mode || ($0 == "common" && commonModes.contains(mode)) }
        if timers.contains(where: { $0.isValid && $0.isIn(mode, common: commonModes) }) { return false }
        if sources.contains(where: { $0.isValid && $0.isIn(mode, common: commonModes) }) { return false }
        return !performs.contains { $0.modes.contains { inMode($0.name) } }
    }

    /// Whether `mode` holds a timer, a user source or a perform (the things
    /// that can wake a loop besides a stop or a wake-up).
    func hasWakeableItems(in mode: String) -> Bool {
        let inMode: (String) -> Bool = { $0 == mode || ($0 == "common" && commonModes.contains(mode)) }
        if timers.contains(where: { $0.isValid && $0.isIn(mode, common: commonModes) }) { return true }
        if sources.contains(where: { $0.isValid && $0.spec.role == .user && $0.isIn(mode, common: commonModes) }) {
            return true
        }
        return performs.contains { $0.modes.contains { inMode($0.name) } }
    }
}

/// What keeps a loop alive, mode by mode, and what a run would do.
public struct WhySnapshot: Sendable {
    /// One mode's contents, as far as waking or ending a run goes.
    public struct Mode: Sendable {
        /// A timer that can fire in the mode.
        public struct Timer: Sendable {
            public var id: String
            public var nextFireAt: Date?
            public var inSeconds: Double?
            public var repeats: Bool
            public var keepAlive: Bool
        }
        /// A source (custom) or port (port source) in the mode.
        public struct Source: Sendable {
            public var id: String
            public var signalled: Bool
            public var keepAlive: Bool
        }
        /// A perform waiting for the mode.
        public struct Perform: Sendable {
            public var id: String
            public var selector: String
            public var delayed: Bool
        }
        public var mode: String
        public var running: Bool
        public var sources: [Source]
        public var ports: [Source]
        public var timers: [Timer]
        public var performs: [Perform]
        public var observers: Int
        public var verdict: String
    }
    public var thread: String
    public var state: WorkerState
    public var currentMode: String?
    public var verdict: String
    public var modes: [Mode]
}

extension Worker {
    /// Per mode, what can wake or end a run in it, and a verdict in one sentence.
    public func why() -> WhySnapshot {
        let snap = snapshot
        let loopModes = modes()
        let keepAliveMode = policy.keepAliveMode.name
        let (timers, sources, observers, performs, common, everFilled) = book.withLock { b in
            (b.timers.all, b.sources.all, b.observers.all, b.performs.queued, b.commonModes, b.everFilled)
        }
        let now = Date()
        var names = loopModes.all
        for extra in [keepAliveMode, snap.currentMode].compactMap({ $0 }) where !names.contains(extra) {
            names.append(extra)
        }
        let inMode: (String, String) -> Bool = { item, mode in
            item == mode || (item == "common" && common.contains(mode))
        }
        var result: [WhySnapshot.Mode] = []
        for name in names {
            var modeTimers: [WhySnapshot.Mode.Timer] = []
            for timer in timers where timer.isValid && timer.isIn(name, common: common) {
                let next = timer.snapshot.nextFireAt
                modeTimers.append(
                    .init(
                        id: timer.id, nextFireAt: next, inSeconds: next.map { max(0, $0.timeIntervalSince(now)) },
                        repeats: timer.spec.repeats, keepAlive: timer.spec.role == .keepAlive))
            }
            var modeSources: [WhySnapshot.Mode.Source] = []
            var modePorts: [WhySnapshot.Mode.Source] = []
            for source in sources where source.isValid && source.isIn(name, common: common) {
                let s = source.snapshot
                let keepAlive = source.spec.role == .keepAlive
                if source.spec.kind == .port {
                    modePorts.append(.init(id: source.id, signalled: s.queued > 0, keepAlive: keepAlive))
                } else {
                    modeSources.append(.init(id: source.id, signalled: s.signalled, keepAlive: keepAlive))
                }
            }
            let modePerforms = performs.filter { $0.modes.contains { inMode($0.name, name) } }.map {
                WhySnapshot.Mode.Perform(id: $0.id, selector: $0.call.selector, delayed: $0.viaTimer)
            }
            let modeObservers = observers.filter { $0.isValid && inMode($0.spec.mode.name, name) }.count
            let running = snap.currentMode == name && (snap.state == .running || snap.state == .waiting)
            let filled = everFilled.contains(name) || (everFilled.contains("common") && common.contains(name))
            var verdict = Self.verdict(
                mode: name, timers: modeTimers, sources: modeSources, ports: modePorts, performs: modePerforms,
                everFilled: filled)
            let empty = modeTimers.isEmpty && modeSources.isEmpty && modePorts.isEmpty && modePerforms.isEmpty
            if running && snap.state == .waiting && empty {
                verdict =
                    "the loop sleeps in \(name), which is now empty: CF looks at the mode only when it wakes, and nothing left in it can wake it; "
                    + "a wake-up (POST /api/threads/\(id)/wakeup) makes this run return finished, a stop stopped, its timeout timedOut"
            }
            if let hint = (try? RunLoopMode(name))?.hint { verdict += " (\(hint))" }
            result.append(
                .init(
                    mode: name, running: running, sources: modeSources, ports: modePorts, timers: modeTimers,
                    performs: modePerforms, observers: modeObservers, verdict: verdict))
        }
        let focus = snap.currentMode ?? keepAliveMode
        let focusVerdict = result.first { $0.mode == focus }?.verdict ?? ""
        let verdict: String
        switch snap.state {
        case .exited:
            verdict = "\(id) has ended: its loop is gone"
        case .running, .waiting:
            verdict = "\(id) is in a run in \(focus) (\(snap.state.rawValue)): \(focusVerdict)"
        case .idle where snap.parked:
            verdict =
                "\(id) is parked: its mode \(focus) is empty (CF answers finished at once), so it waits until something is added"
        case .idle where policy.style == .manual:
            verdict =
                "\(id) is manual and not running: it runs only when asked (POST /api/threads/\(id)/run); \(focusVerdict)"
        case .idle:
            verdict = "\(id) is between runs; \(focusVerdict)"
        }
        return WhySnapshot(
            thread: id, state: snap.state, currentMode: snap.currentMode, verdict: verdict, modes: result)
    }

    static func verdict(
        mode: String, timers: [WhySnapshot.Mode.Timer], sources: [WhySnapshot.Mode.Source],
        ports: [WhySnapshot.Mode.Source], performs: [WhySnapshot.Mode.Perform], everFilled: Bool
    ) -> String {
        if timers.isEmpty && sources.isEmpty && ports.isEmpty && performs.isEmpty {
            return everFilled
                ? "a run in \(mode) finishes at once: the mode is empty"
                : "a run in \(mode) finishes at once: nothing was ever added to the mode"
        }
        var wakes: [String] = []
        if let due = performs.first(where: { !$0.delayed }) {
            wakes.append("perform \(due.id) (\(due.selector)) runs on its next turn")
        }
        let userTimers = timers.filter { !$0.keepAlive }
        if let next = userTimers.compactMap({ t in t.inSeconds.map { (t.id, $0) } }).min(by: { $0.1 < $1.1 }) {
            wakes.append(
                next.1 < 0.001
                    ? "timer \(next.0) is due: it fires as soon as the loop runs in \(mode)"
                    : String(format: "timer %@ fires in %.2f s", next.0, next.1))
        }
        if let signalled = sources.first(where: \.signalled) {
            wakes.append("source \(signalled.id) is signalled and runs on the next turn that happens")
        } else if !sources.isEmpty {
            wakes.append("a signal plus a wake-up of \(sources.map(\.id).joined(separator: ", ")) wakes it")
        }
        let userPorts = ports.filter { !$0.keepAlive }
        if !userPorts.isEmpty {
            wakes.append("a message to \(userPorts.map(\.id).joined(separator: ", ")) wakes it")
        }
        let delayed = performs.filter(\.delayed)
        if !delayed.isEmpty {
            wakes.append(
                "delayed perform\(delayed.count == 1 ? "" : "s") \(delayed.map(\.id).joined(separator: ", ")) fire on their timers"
            )
        }
        if wakes.isEmpty {
            let keeper =
                ports.contains(where: \.keepAlive)
                ? "its keep-alive port (never written)" : "its keep-alive timer (one fire a day)"
            return
                "a run in \(mode) sleeps until its timeout, a stop or a wake-up: only \(keeper) keeps it from finishing"
        }
        return "a run in \(mode) sleeps until " + wakes.joined(separator: "; or ")
    }
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
