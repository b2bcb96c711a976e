/// Predicts what one `CFRunLoopRunInMode(mode, seconds, returnAfterSourceHandled)`
/// returns, by playing swift-corelibs-foundation's `__CFRunLoopRun` over a
/// `LoopModel`: an empty mode finishes at entry; each pass notifies
/// `beforeTimers` and `beforeSources`, runs the signalled version-0 sources
/// by order (only the first with `returnAfterSourceHandled`), polls instead
/// of sleeping after a handled one, otherwise notifies `beforeWaiting` and
/// sleeps until one descriptor is ready (a due timer, a port with messages,
/// a wake-up, the run's timeout), handles it, and checks, in CF's order:
/// handled source, timed out, stopped, mode empty.
///
/// Callouts are taken to last no time. Where two things would be ready
/// within `margin` seconds of each other, the order is a race.
package struct RunSimulator {
    var model: LoopModel
    let mode: String
    let seconds: Double
    let returnAfterSourceHandled: Bool
    var stimuli: [Stimulus]
    let margin: Double
    /// When the run begins (seconds from the read): 0, or a nested run's
    /// start inside the predicted one.
    let start: Double
    /// How deep inside the predicted run this one is (0: the predicted run).
    let depth: Int

    // The run as it goes.
    var now = 0.0
    var stopped = false
    /// Who stopped the run: from outside (wins, as the run's own record
    /// does), or the `stop` selector's last callout.
    var stopOrigin: StopOrigin?
    var stopBy: StopOrigin?
    /// Since when CF's wake-up descriptor is readable (nil: it is not). A
    /// wake-up outside a run, or between waking and the next pass, is
    /// ignored (CF's per-run `ignoreWakeUps`).
    var wakeSince: Double?
    /// That wake-up was made by a callout (the loop's own thread): after
    /// everything already ready at its moment, never a race with it.
    var wakeByLoop = false
    var ignoringWakeUps = false
    /// Per port source (index): since when its descriptor is readable.
    var portSince: [Int: Double] = [:]
    /// Per mode: when its timerfd expires (nil: disarmed, or read since):
    /// its earliest timer's fire date, or the date it kept after its last
    /// timer left (CF on Linux never disarms it).
    var fds: [String: Double] = [:]
    /// CF adds its descriptors to epoll edge-triggered: one joins the ready
    /// list when it becomes readable, and a wait hands back the one that
    /// joined first. A timerfd armed at a date already past becomes readable
    /// at that moment, not at the date: per mode, when that was (nil: at
    /// its date). Arms made while the loop was read are not known: at its date.
    var armedAt: [String: Place] = [:]
    /// Orders what the loop itself makes ready at one moment (a callout's
    /// wake-up, a descriptor put back on the list): callouts take no time here.
    var sequence = 0
    var wakeSequence = 0
    /// The deadlines of the runs this one is nested in: CF delivers each
    /// run's timeout as a `CFRunLoopWakeUp`, which wakes the innermost run.
    var outerTimeouts: [Double] = []
    /// Why the run cannot be played on: a nested run that never returns.
    var stuck: String?
    /// The run's timeout came while a nested run ran: CF's one-shot
    /// dispatch timer woke that run instead, and none is left to wake this
    /// one (it still times out at the end of any pass past its deadline).
    var timeoutSpent = false
    /// The nested runs the run's callouts start, in the order they return.
    var nested: [Prediction] = []
    var timerFires = 0
    var passSources: [CalloutRef] = []
    var lastSource: CalloutRef?
    var lastRemoval: [String: (kind: String, id: String, how: String)] = [:]
    var turns: [Prediction.Turn] = []
    var turn = OpenTurn(wokeBy: WokeBy(kind: .none), afterWake: false)
    /// Per carrier key: signalled and in the loop.
    var carriers: [String: Bool] = [:]
    var reasons: [String] = []
    /// Each race decision's why, in the order they were met (`decide`).
    var races: [String] = []
    /// The play could not be taken to its end (a nested run that never
    /// returns, too many passes, the budget spent): never certain.
    var unsettled = false
    var entered = false
    var passes = 0
    /// Passes played one by one; past them, only repeating timers are left
    /// to count (`fastForward`), or the prediction gives up.
    static let maxPasses = 4000
    /// The work left for this prediction and the others of the same call
    /// (a `/why` predicts every mode): it runs on the control loop.
    var budget = PredictBudget()
    /// Whether the run was given up because `budget` ran out.
    var outOfBudget = false
    /// The race decision (an index of `races`) to take the other way, if any.
    var flip: Int?

    struct OpenTurn {
        var wokeBy: WokeBy?
        var afterWake: Bool
        var callouts: [CalloutRef] = []
    }

    /// A place on epoll's ready list: when, then in what order at that moment.
    struct Place {
        var since: Double
        var sequence: Int
    }

    enum Live {
        case timer
        case port(Int)
        case wakeUp(timeout: Bool)
        case never
    }

    /// CF's `TIMER_INTERVAL_LIMIT`: a longer run has no timeout timer at all.
    static let intervalLimit = 504_911_232.0
    /// Nested runs inside nested runs played, at most.
    static let maxNesting = 8

    init(
        model: LoopModel, mode: String, seconds: Double, returnAfterSourceHandled: Bool, stimuli: [Stimulus],
        margin: Double, start: Double = 0, depth: Int = 0
    ) {
        self.model = model
        self.mode = mode
        self.seconds = seconds
        self.returnAfterSourceHandled = returnAfterSourceHandled
        self.stimuli = stimuli.sorted { $0.at < $1.at }
        self.margin = margin
        self.start = start
        self.depth = depth
        now = start
        for perform in model.performs {
            for key in perform.keys { carriers[key] = true }
        }
        fds = model.staleTimerfd
        for name in Set(model.timers.filter(\.valid).flatMap(\.modes)) {
            if let next = nextFire(in: name) { fds[name] = next }
        }
        // A port with messages is readable since its oldest was sent: a timer
        // due before that is handed back first (epoll's ready list is first
        // in, first out), one due after it second.
        for (index, source) in model.sources.enumerated() where source.port && source.queued > 0 {
            portSince[index] = source.readySince ?? -1
        }
    }

    var hasTimeout: Bool { seconds > 0 && seconds <= Self.intervalLimit }
    /// When the run times out (seconds from the read).
    var deadline: Double { start + seconds }
    /// The run's own mode's timerfd.
    var armed: Double? {
        get { fds[mode] }
        set {
            fds[mode] = newValue
            if newValue == nil { armedAt[mode] = nil }
        }
    }

    // MARK: - The run

    mutating func run() -> Prediction {
        var prediction = play()
        prediction.nested = nested
        return prediction
    }

    private mutating func play() -> Prediction {
        if isEmpty() {
            reasons.append(
                everFilled
                    ? "mode \(mode) holds no source, timer or perform now, so CF returns finished at entry"
                    : "nothing was ever added to mode \(mode): CF returns finished at entry")
            return finish(.finished, cause: finishedCause(atEntry: true))
        }
        entered = true
        notify(.entry)
        // `__CFRunLoopRun` checks the run's stop flag before its first pass:
        // an `entry` observer's stop ends the run before any pass is made.
        if stopped {
            reasons.append(
                "CFRunLoopStop was called by an entry observer: CF checks the stop flag before the first pass")
            return finish(.stopped, cause: .stop(stopOrigin ?? stopBy))
        }
        return playPasses()
    }

    /// `__CFRunLoopRun`'s loop, for a run from its entry or one under way:
    /// passes until the run ends or is stuck; past `maxPasses`, or once the
    /// budget is spent, only `fastForward` is left.
    mutating func playPasses() -> Prediction {
        while true {
            if let end = pass() { return end }
            if let why = stuck { return unknown(why) }
            passes += 1
            // A pass looks at every item of the loop once or so.
            budget.left -= 1 + model.itemCount
            if budget.left <= 0 { outOfBudget = true }
            if passes >= Self.maxPasses || outOfBudget { return fastForward() }
        }
    }

    /// One pass of `__CFRunLoopRun`'s loop; returns the run's end if it ends.
    mutating func pass() -> Prediction? {
        ignoringWakeUps = false
        notify(.beforeTimers)
        notify(.beforeSources)
        doBlocks()
        let handled = doSources0()
        if handled { doBlocks() }
        if let why = stuck { return unknown(why) }
        if handled || seconds <= 0 { return handle(readyNow() ?? .never, handled: handled, polled: true) }
        notify(.beforeWaiting)
        closeTurn(end: .sleep)
        return sleepAndHandle(handled: handled)
    }

    /// The second half of a pass that sleeps (a run under way that sleeps
    /// now is played from here): what wakes the loop, then `handle`.
    mutating func sleepAndHandle(handled: Bool) -> Prediction? {
        let live = sleep()
        if case .never = live {
            reasons.append(asleepText(timeoutSpent: timeoutSpent))
            return Prediction(
                mode: mode, seconds: seconds, returnAfterSourceHandled: returnAfterSourceHandled,
                outcome: .init(exitReason: nil, cause: nil, atMs: nil), windowMs: nil, certain: races.isEmpty,
                race: nil, reasons: reasons, turns: turns)
        }
        openTurn()
        // CF ignores wake-ups from here (before `afterWaiting`) until the
        // next pass: one an afterWaiting observer makes is dropped.
        ignoringWakeUps = true
        // CF read the descriptor that woke it (a timerfd, a port's or the
        // wake-up eventfd) in its wait: a run an afterWaiting observer
        // nests does not find it ready.
        var taken: (armed: Double?, queued: Int) = (nil, 0)
        switch live {
        case .timer: (taken.armed, armed) = (armed, nil)
        case .port(let index): (taken.queued, model.sources[index].queued) = (model.sources[index].queued, 0)
        case .wakeUp: wakeSince = nil
        case .never: break
        }
        notify(.afterWaiting)
        if case .timer = live, armed == nil { armed = taken.armed }
        if case .port(let index) = live { model.sources[index].queued += taken.queued }
        return handle(live, handled: handled, polled: false)
    }

    /// What the pass found ready (the timers, a port, a wake-up), the blocks
    /// after it, and CF's checks at the end of the pass. `polled`: found by a
    /// poll (a slept pass took its wake-up before `afterWaiting`).
    mutating func handle(_ live: Live, handled: Bool, polled: Bool) -> Prediction? {
        var handled = handled
        ignoringWakeUps = true
        switch live {
        case .timer: doTimers()
        case .port(let index): handled = doSource1(index) || handled
        case .wakeUp: if polled { wakeSince = nil }
        case .never: break
        }
        doBlocks()
        return endOfPass(handled: handled)
    }

    /// CF's checks at the end of a pass, in its order.
    mutating func endOfPass(handled: Bool) -> Prediction? {
        if let why = stuck { return unknown(why) }
        // Given up inside the pass (its fires not all played): no end is
        // judged from half a pass; `playPasses` gives the run up.
        if outOfBudget { return nil }
        if handled && returnAfterSourceHandled {
            reasons.append("a source was handled and the run was asked to return after one")
            return finish(.handledSource, cause: .sourceHandled(lastSource, pass: passSources))
        }
        if seconds <= 0 || (hasTimeout && now >= deadline) {
            reasons.append(
                timerFires > 0
                    ? "the run's \(ExitCause.seconds(seconds)) deadline passes; its \(timerFires) timer fires never count as handled sources"
                    : "the run's \(ExitCause.seconds(seconds)) deadline passes with nothing ending it before")
            return finish(.timedOut, cause: .deadline(seconds: seconds, timerFires: timerFires))
        }
        if stopped {
            reasons.append("CFRunLoopStop was called during the run: the pass ends it")
            return finish(.stopped, cause: .stop(stopOrigin ?? stopBy))
        }
        if isEmpty() {
            reasons.append("the mode \(mode) is left without sources or timers: CF returns finished")
            return finish(.finished, cause: finishedCause(atEntry: false))
        }
        return nil
    }

    private var everFilled: Bool { model.everFilled.contains(mode) }

    private func finishedCause(atEntry: Bool) -> ExitCause {
        guard everFilled else { return ExitCause.modeMissing(mode).hinting(mode) }
        let removal = atEntry ? nil : lastRemoval[mode]
        let cause = ExitCause.modeEmpty(
            mode, emptiedBy: removal.map { Removal(kind: $0.kind, id: $0.id, how: $0.how, mono: 0) })
        return cause.hinting(mode)
    }

    private mutating func finish(_ reason: ExitReason, cause: ExitCause) -> Prediction {
        if entered { notify(.exit) }
        closeTurn(end: .exit, reason: reason)
        return Prediction(
            mode: mode, seconds: seconds, returnAfterSourceHandled: returnAfterSourceHandled,
            outcome: .init(exitReason: reason, cause: cause, atMs: ((now - start) * 1_000_000).rounded() / 1000),
            windowMs: nil,
            certain: races.isEmpty, race: nil, reasons: reasons, turns: turns)
    }

    // MARK: - The mode's contents

    /// `__CFRunLoopModeIsEmpty`: no source (version 0 or 1), timer, carrier or block.
    func isEmpty() -> Bool {
        if model.timers.contains(where: { $0.valid && $0.modes.contains(mode) }) { return false }
        if model.sources.contains(where: { $0.valid && $0.modes.contains(mode) }) { return false }
        if blocksHold(mode) { return false }
        return !carriers.keys.contains { model.expand([$0]).contains(mode) }
    }

    /// Records the removal of an item from its modes (the explainer's
    /// `lastRemoval`).
    mutating func removed(_ kind: String, _ id: String, how: String, from names: [String]) {
        for name in model.expand(names) { lastRemoval[name] = (kind, id, how) }
    }
}
