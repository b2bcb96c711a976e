import CoreFoundation
import Foundation
import Primitives

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
        /// What a run in the mode would return: with no deadline and without
        /// returnAfterSourceHandled, or, in the mode of a thread that runs
        /// itself, the thread's own run (`Worker.ownRun`).
        public var prediction: Prediction? = nil
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
        let (timers, sources, observers, performs, common, everFilled, stale) = book.withLock { b in
            (
                b.timers.all, b.sources.all, b.observers.all, b.performs.queued, b.commonModes, b.everFilled,
                b.timerfdStale
            )
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
            // CF on Linux leaves the mode's timerfd armed at a removed timer's date.
            let staleIn = stale[name].map { max(0, $0 - now.timeIntervalSinceReferenceDate) }
            var verdict = Self.verdict(
                mode: name, timers: modeTimers, sources: modeSources, ports: modePorts, performs: modePerforms,
                everFilled: filled, staleWakeIn: staleIn)
            let empty = modeTimers.isEmpty && modeSources.isEmpty && modePorts.isEmpty && modePerforms.isEmpty
            if running && snap.state == .waiting && empty {
                verdict = Self.emptyAsleepVerdict(thread: id, mode: name, staleWakeIn: staleIn)
            }
            if let hint = (try? RunLoopMode(name))?.hint { verdict += " (\(hint))" }
            result.append(
                .init(
                    mode: name, running: running, sources: modeSources, ports: modePorts, timers: modeTimers,
                    performs: modePerforms, observers: modeObservers, verdict: verdict))
        }
        var model = loopModel()
        model.depth = 0
        let own = ownRun
        let budget = PredictBudget()  // one for every mode: this runs on the control loop
        for index in result.indices where result[index].mode != "common" && snap.state != .exited {
            let name = result[index].mode
            let mine = policy.style != .manual && name == own.mode.name
            result[index].prediction = Self.predict(
                model, mode: name, seconds: mine ? own.seconds : RunPolicy.distantFuture,
                returnAfterSourceHandled: mine ? own.returnAfterSourceHandled : false, budget: budget)
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

    /// The verdict for a loop asleep in a mode a removal emptied. With
    /// `staleWakeIn` (seconds), the mode's timerfd is still armed at a
    /// removed timer's date: CF on Linux never disarms it, so the loop
    /// wakes once then, finds nothing to fire, and the run returns finished.
    static func emptyAsleepVerdict(thread id: String, mode name: String, staleWakeIn: Double?) -> String {
        let start = "the loop sleeps in \(name), which is now empty: CF looks at the mode only when it wakes, and "
        let fixes =
            "a wake-up (POST /api/threads/\(id)/wakeup) makes this run return finished, a stop stopped, its timeout timedOut"
        guard let staleWakeIn else { return start + "nothing left in it can wake it; " + fixes }
        return start
            + String(
                format:
                    "its timer descriptor is still armed at a removed timer's fire date (CF on Linux does not disarm it): the loop wakes once in %.2f s, finds nothing to fire, and the run returns finished then; before that, ",
                staleWakeIn) + fixes
    }

    static func verdict(
        mode: String, timers: [WhySnapshot.Mode.Timer], sources: [WhySnapshot.Mode.Source],
        ports: [WhySnapshot.Mode.Source], performs: [WhySnapshot.Mode.Perform], everFilled: Bool,
        staleWakeIn: Double? = nil
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
        if let staleWakeIn, userTimers.isEmpty {
            wakes.append(
                String(
                    format:
                        "its timer descriptor, left armed at a removed timer's fire date (CF on Linux does not disarm it), wakes it once in %.2f s with nothing to fire, and it sleeps on",
                    staleWakeIn))
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
