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
        let (timers, sources, observers, performs, common, everFilled, stale, frame) = book.withLock { b in
            (
                b.timers.all, b.sources.all, b.observers.all, b.performs.queued, b.commonModes, b.everFilled,
                b.timerfdStale, b.runStack.last
            )
        }
        let now = Date()
        // The run under way (the innermost), from now: its mode, what is left
        // of its deadline, whether it returns after a handled source.
        let under = frame.map { f in
            RunUnderWay(
                mode: f.mode, seconds: f.seconds, left: max(0, f.seconds - (Monotonic.now() - f.startedMono)),
                returnAfterSourceHandled: f.returnAfterSourceHandled)
        }
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
                everFilled: filled, staleWakeIn: staleIn, run: running ? under : nil,
                asleep: running && snap.state == .waiting)
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
        let budget = requestBudget()  // one for every mode: this runs on the control loop
        defer { account(budget) }
        for index in result.indices where result[index].mode != "common" && snap.state != .exited {
            let name = result[index].mode
            if result[index].running, let under, under.mode == name {
                result[index].prediction = Self.predict(
                    model, mode: name, seconds: under.left, returnAfterSourceHandled: under.returnAfterSourceHandled,
                    budget: budget)
                continue
            }
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
            verdict = "\(id) is in \(under?.phrase ?? "a run") in \(focus) (\(snap.state.rawValue)): \(focusVerdict)"
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
        staleWakeIn: Double? = nil, run: RunUnderWay? = nil, asleep: Bool = false
    ) -> String {
        if timers.isEmpty && sources.isEmpty && ports.isEmpty && performs.isEmpty {
            return everFilled
                ? "a run in \(mode) finishes at once: the mode is empty"
                : "a run in \(mode) finishes at once: nothing was ever added to the mode"
        }
        // What waits to run on the next turn, and what will or can bring one.
        var waiting: [String] = []
        // Everything that ends the sleep (the run's deadline too), and what
        // wakes the loop to turn again (a deadline or a stop ends the run instead).
        var wakes: [String] = []
        var wakers: [String] = []
        func wake(_ text: String) {
            wakes.append(text)
            wakers.append(text)
        }
        if let due = performs.first(where: { !$0.delayed }) {
            waiting.append("perform \(due.id) (\(due.selector))")
        }
        let userTimers = timers.filter { !$0.keepAlive }
        if let next = userTimers.compactMap({ t in t.inSeconds.map { (t.id, $0) } }).min(by: { $0.1 < $1.1 }) {
            if next.1 < 0.001 {
                waiting.append("timer \(next.0) (due)")
            } else {
                wake(String(format: "timer %@ fires in %.2f s", next.0, next.1))
            }
        }
        let signalled = sources.filter(\.signalled)
        if !signalled.isEmpty {
            waiting.append("source \(signalled.map(\.id).joined(separator: ", ")) (signalled)")
        }
        // A port holding a message (`signalled` for a port) is work for the
        // next turn; one asleep is woken by it at once (epoll).
        let holding = ports.filter(\.signalled)
        if !holding.isEmpty && !asleep {
            waiting.append("port \(holding.map(\.id).joined(separator: ", ")) (a message queued)")
        }
        var deadline: String?
        if let run, run.seconds < 1e9 {
            deadline = String(format: "in %.2f s, of its %@", run.left, ExitCause.seconds(run.seconds))
            wakes.append(
                String(
                    format: "its deadline passes in %.2f s (of its %@)", run.left, ExitCause.seconds(run.seconds)))
        }
        let quiet = sources.filter { !$0.signalled }
        if !quiet.isEmpty {
            wake("a signal plus a wake-up of \(quiet.map(\.id).joined(separator: ", ")) wakes it")
        }
        if !ports.isEmpty {
            let names = ports.map { $0.keepAlive ? "\($0.id) (its keep-alive port)" : $0.id }
            wake("a message to \(names.joined(separator: ", ")) wakes it")
        }
        if let staleWakeIn, userTimers.isEmpty {
            wake(
                String(
                    format:
                        "its timer descriptor, left armed at a removed timer's fire date (CF on Linux does not disarm it), wakes it once in %.2f s with nothing to fire, and it sleeps on",
                    staleWakeIn))
        }
        let delayed = performs.filter(\.delayed)
        if !delayed.isEmpty {
            wake(
                "delayed perform\(delayed.count == 1 ? "" : "s") \(delayed.map(\.id).joined(separator: ", ")) fire on their timers"
            )
        }
        let onlyKeeper = waiting.isEmpty && wakes.count == ports.count && ports.allSatisfy(\.keepAlive)
        wakes.append("a stop or a wake-up")
        let subject = run == nil ? "a run in \(mode)" : "the run under way in \(mode)"
        if !waiting.isEmpty {
            let list = waiting.joined(separator: ", ")
            if asleep {
                // Only a wake brings that turn: the deadline and a stop end
                // the run (CF checks them after the wake, before any source).
                let ends =
                    deadline.map {
                        "if its deadline passes first (\($0)), the run returns timedOut with it still waiting, and a stop returns stopped"
                    }
                    ?? "a stop returns stopped with it still waiting"
                let first =
                    run?.returnAfterSourceHandled == true
                    ? "; with returnAfterSourceHandled, a turn that handles a port message or another source first returns without it"
                    : ""
                return
                    "the loop sleeps in \(mode) although work is waiting there (\(list)): "
                    + "a sleeping loop looks at it only on its next turn (a signal without a wake-up does not wake it), "
                    + "which comes when something wakes it: " + (wakers + ["a wake-up"]).joined(separator: "; or ")
                    + "; " + ends + first
            }
            return "\(subject) handles \(list) on its next turn; after that it sleeps until "
                + wakes.joined(separator: "; or ")
        }
        if onlyKeeper && run == nil {
            guard let port = ports.first else {
                return
                    "a run in \(mode) sleeps until its timeout, a stop or a wake-up: only its keep-alive timer (one fire a day) keeps it from finishing"
            }
            return
                "a run in \(mode) sleeps until its timeout, a stop, a wake-up or a message to its keep-alive port \(port.id): only that port keeps it from finishing"
        }
        return "\(subject) sleeps until " + wakes.joined(separator: "; or ")
    }
}

/// The run under way, as `/why` tells it: its mode, its deadline (seconds
/// asked, seconds left) and whether it returns after a handled source.
struct RunUnderWay {
    var mode: String
    var seconds: Double
    var left: Double
    var returnAfterSourceHandled: Bool

    /// "a 1.5 s run (1.20 s left, returnAfterSourceHandled)", "a run with no timeout".
    var phrase: String {
        let rash = returnAfterSourceHandled ? ", returnAfterSourceHandled" : ""
        guard seconds < 1e9 else {
            return "a run with no timeout" + (rash.isEmpty ? "" : " (returnAfterSourceHandled)")
        }
        return "a \(ExitCause.seconds(seconds)) run (" + String(format: "%.2f s left", left) + rash + ")"
    }
}
