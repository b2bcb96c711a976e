import Foundation

/// The predictor's callouts: version-0 sources and perform carriers, timers,
/// port sources, observers, the turns they fall in, and outside stimuli.
extension RunSimulator {
    // MARK: - Version-0 sources

    /// `__CFRunLoopDoSources0`: every signalled source in the mode by order
    /// (a perform carrier has order 0); with `returnAfterSourceHandled`,
    /// only the first. Returns whether one was handled.
    mutating func doSources0() -> Bool {
        var ready: [(order: Int, carrier: String?, index: Int?)] = []
        for (key, signalled) in carriers.sorted(by: { $0.key < $1.key })
        where signalled && model.expand([key]).contains(mode) {
            ready.append((0, key, nil))
        }
        for (index, source) in model.sources.enumerated()
        where source.valid && !source.port && source.signalled && source.modes.contains(mode) {
            ready.append((source.order, nil, index))
        }
        guard !ready.isEmpty else { return false }
        ready.sort { $0.order < $1.order }
        let orders = ready.map(\.order)
        if Set(orders).count < orders.count {
            races.append(
                "version-0 sources of equal order are ready together: CF runs them in its set's order, which nobody chooses"
            )
        }
        for entry in ready {
            if let key = entry.carrier { runCarrier(key) } else if let index = entry.index { runSource0(index) }
            if returnAfterSourceHandled { break }
        }
        return true
    }

    private mutating func runSource0(_ index: Int) {
        model.sources[index].signalled = false
        let source = model.sources[index]
        callout(CalloutRef(kind: .source, id: source.id, selector: source.selector))
    }

    /// A mode's perform carrier: runs, in queue order, the performs for its
    /// key; then leaves the mode when none is left for it.
    private mutating func runCarrier(_ key: String) {
        carriers[key] = false
        var last: String?
        while let index = model.performs.firstIndex(where: { $0.keys.contains(key) }) {
            let perform = model.performs.remove(at: index)
            for other in perform.keys where other != key && !model.performs.contains(where: { $0.keys.contains(other) })
            {
                carriers[other] = nil
            }
            callout(CalloutRef(kind: .perform, id: perform.id, selector: perform.selector))
            last = perform.id
        }
        if !model.performs.contains(where: { $0.keys.contains(key) }) {
            carriers[key] = nil
            removed("perform", last ?? "-", how: "ran, and its mode's perform source left the mode", from: [key])
        }
    }

    // MARK: - Timers and ports

    /// `__CFRunLoopDoTimers`: every timer of the mode due now, earliest first.
    mutating func doTimers() {
        let due = model.timers.indices.filter {
            model.timers[$0].valid && model.timers[$0].modes.contains(mode) && model.timers[$0].next <= now + 1e-9
        }.sorted { model.timers[$0].next < model.timers[$1].next }
        for index in due { fire(index) }
        rearm(keepStale: false)
    }

    private mutating func fire(_ index: Int) {
        var timer = model.timers[index]
        timer.fires += 1
        timerFires += 1
        if timer.perform {
            timer.valid = false
            model.timers[index] = timer
            removed(
                "perform", timer.id, how: "fired after its delay (its one-shot timer left the mode)",
                from: timer.modeNames)
            var ref = CalloutRef(kind: .perform, id: timer.id, selector: timer.selector)
            ref.throughTimer = true
            callout(ref)
            return
        }
        let prefix = timer.role == .keepAlive ? "(the keep-alive timer) " : ""
        if let max = timer.maxFires, timer.fires >= max {
            timer.valid = false
            removed(
                "timer", timer.id, how: prefix + "was invalidated after its last fire (maxFires \(timer.fires))",
                from: timer.modeNames)
        } else if let interval = timer.interval {
            // The next point of its grid after now (CF never fires twice to catch up).
            let skipped = ((now - timer.next) / interval).rounded(.down)
            timer.next += interval * (skipped + 1)
        } else {
            timer.valid = false
            removed(
                "timer", timer.id, how: prefix + "fired once (CF invalidates a one-shot timer after its fire)",
                from: timer.modeNames)
        }
        model.timers[index] = timer
        callout(CalloutRef(kind: .timer, id: timer.id, selector: timer.selector))
    }

    /// `__CFRunLoopDoSource1`: the port's perform routine drains every
    /// queued message in one callout.
    mutating func doSource1(_ index: Int) -> Bool {
        model.sources[index].queued = 0
        portSince[index] = nil
        let source = model.sources[index]
        callout(CalloutRef(kind: .port, id: source.id, selector: source.selector))
        return true
    }

    // MARK: - Callouts, observers, turns

    mutating func callout(_ ref: CalloutRef) {
        if turn.afterWake && turn.wokeBy == nil && ref.kind != .observer && ref.kind != .task {
            turn.wokeBy = WokeBy(kind: WakeKind(rawValue: ref.kind.rawValue) ?? .wakeup, id: ref.id)
        }
        turn.callouts.append(ref)
        if ref.countsAsSource {
            lastSource = ref
            passSources.append(ref)
        }
        if ref.selector == "stop" {
            stopped = true
            stopBy = .selector(callout: ref)
            wake()
        }
    }

    /// `__CFRunLoopDoObservers`: the mode's observers of `activity`, by order.
    mutating func notify(_ activity: Activity) {
        let indices = model.observers.indices.filter {
            let o = model.observers[$0]
            return o.valid && o.activities.contains(activity) && o.modes.contains(mode)
        }.sorted { model.observers[$0].order < model.observers[$1].order }
        for index in indices {
            if !model.observers[index].repeats { model.observers[index].valid = false }
            let observer = model.observers[index]
            callout(CalloutRef(kind: .observer, id: observer.id, selector: observer.selector))
        }
    }

    mutating func closeTurn(end: TurnEnd, reason: ExitReason? = nil) {
        var woke = turn.wokeBy
        if turn.afterWake && woke == nil { woke = WokeBy(kind: reason == .timedOut ? .timeout : .wakeup) }
        turns.append(Prediction.Turn(wokeBy: woke ?? WokeBy(kind: .none), callouts: turn.callouts, end: end))
    }

    mutating func openTurn() {
        turn = OpenTurn(wokeBy: nil, afterWake: true)
        passSources.removeAll()
    }

    // MARK: - Stimuli

    /// Applies the stimuli due by `time`, in order.
    mutating func applyStimuli(upTo time: Double) {
        while let next = stimuli.first, next.at <= time + 1e-9 {
            stimuli.removeFirst()
            apply(next.kind)
        }
    }

    /// `CFRunLoopWakeUp`: the wake-up descriptor is readable from now on
    /// (a second wake-up before CF reads it changes nothing).
    mutating func wake() {
        if wakeSince == nil && !ignoringWakeUps { wakeSince = now }
    }

    private mutating func apply(_ kind: Stimulus.Kind) {
        switch kind {
        case .stop(let origin):
            stopped = true
            if stopOrigin == nil { stopOrigin = origin }
            wake()
        case .wakeUp:
            wake()
        case .signal(let id, let wake):
            // runloopd refuses to signal an invalidated source: no wake-up either.
            if let index = model.sources.firstIndex(where: { $0.id == id && $0.valid }) {
                model.sources[index].signalled = true
                if wake { self.wake() }
            }
        case .message(let id):
            if let index = model.sources.firstIndex(where: { $0.id == id && $0.valid }) {
                if model.sources[index].queued == 0 { portSince[index] = now }
                model.sources[index].queued += 1
            }
        case .invalidateSource(let id, let wake):
            if let index = model.sources.firstIndex(where: { $0.id == id && $0.valid }) {
                model.sources[index].valid = false
                let source = model.sources[index]
                let how = source.role == .keepAlive ? "(the keep-alive port) was invalidated" : "was invalidated"
                removed("source", id, how: how, from: source.modeNames)
            }
            if wake { self.wake() }
        case .invalidateTimer(let id, let wake):
            if let index = model.timers.firstIndex(where: { $0.id == id && $0.valid }) {
                model.timers[index].valid = false
                let timer = model.timers[index]
                let how = timer.role == .keepAlive ? "(the keep-alive timer) was invalidated" : "was invalidated"
                removed("timer", id, how: how, from: timer.modeNames)
                rearm(keepStale: true)
            }
            if wake { self.wake() }
        case .perform(let perform):
            // A carrier already signalled is not signalled (nor the loop
            // woken) again: a burst of performs costs one wake-up.
            let wakes = perform.keys.contains { carriers[$0] != true }
            model.performs.append(perform)
            for key in perform.keys { carriers[key] = true }
            if wakes { wake() }
        case .cancelDelayed(let ids):
            for index in model.timers.indices
            where model.timers[index].perform && model.timers[index].valid && ids.contains(model.timers[index].id) {
                model.timers[index].valid = false
                removed(
                    "perform", model.timers[index].id, how: "was cancelled before its delay passed",
                    from: model.timers[index].modeNames)
                rearm(keepStale: true)
            }
        }
    }
}
