/// The predictor's callouts: version-0 sources and perform carriers, timers,
/// port sources, observers, the turns they fall in, and outside stimuli.
extension RunSimulator {
    // MARK: - Version-0 sources

    /// `__CFRunLoopDoSources0`: every signalled source in the mode by order
    /// (a perform carrier has order 0); with `returnAfterSourceHandled`,
    /// only the first. Returns whether the last one it came to was handled.
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
        // Equal orders: CF sorts its set's sources by order alone, so they
        // run in the set's order, which nobody chooses. Each source of a
        // group is played first once (a decision per source after the
        // first), so the answer names each source a run may handle first.
        let groups = Dictionary(grouping: ready.indices, by: { ready[$0].order }).filter { $0.value.count > 1 }
        let after = returnAfterSourceHandled ? "; the run returns after the first one handled" : ""
        for (order, indices) in groups.sorted(by: { $0.key < $1.key }) {
            let ids = indices.map { index in
                ready[index].carrier.map { "the perform source of \($0)" }
                    ?? ready[index].index.map { model.sources[$0].id } ?? ""
            }
            let listed = ids.dropLast().joined(separator: ", ") + " and " + ids[ids.count - 1]
            let why =
                "version-0 sources of equal order are signalled together, \(listed) (order \(order)): "
                + "CF runs them in its set's order, which nobody chooses\(after)"
            for k in indices.indices.dropFirst() {
                // One decision per source after the first; taken, that source
                // goes first (sorted by order, a group's entries are adjacent).
                if decide(why) {
                    let entry = ready.remove(at: indices[k])
                    ready.insert(entry, at: indices[0])
                }
            }
        }
        // CF (swift-corelibs) keeps only the last source's result: a source
        // a nested run inside an earlier one's callout already handled (CF
        // checks each again as it comes) makes the pass count as not
        // having handled one, so it sleeps instead of polling.
        var handled = false
        for entry in ready {
            if let key = entry.carrier, carriers[key] == true {
                runCarrier(key)
                handled = true
            } else if let index = entry.index, model.sources[index].signalled, model.sources[index].valid {
                runSource0(index)
                handled = true
            } else {
                handled = false
            }
            if (returnAfterSourceHandled && handled) || stuck != nil { break }
        }
        return handled
    }

    private mutating func runSource0(_ index: Int) {
        model.sources[index].signalled = false
        let source = model.sources[index]
        callout(CalloutRef(kind: .source, id: source.id, selector: source.selector), nested: source.nested)
    }

    /// A mode's perform carrier: runs, in queue order, the performs for its
    /// key queued before it began; then leaves the mode when none is left
    /// for it.
    private mutating func runCarrier(_ key: String) {
        carriers[key] = false
        var last: String?
        let bound = Set(model.performs.filter { $0.keys.contains(key) }.map(\.id))
        while let index = model.performs.firstIndex(where: { $0.keys.contains(key) && bound.contains($0.id) }) {
            let perform = model.performs.remove(at: index)
            for other in perform.keys where other != key && !model.performs.contains(where: { $0.keys.contains(other) })
            {
                carriers[other] = nil
            }
            callout(CalloutRef(kind: .perform, id: perform.id, selector: perform.selector), nested: perform.nested)
            last = perform.id
        }
        // (A nested run may have run the carrier again and taken it out.)
        if !model.performs.contains(where: { $0.keys.contains(key) }), carriers[key] != nil {
            carriers[key] = nil
            removed("perform", last ?? "-", how: "ran, and its mode's perform source left the mode", from: [key])
        }
    }

    // MARK: - Timers and ports

    /// `__CFRunLoopDoTimers`: every timer of the mode due now (the timerfd
    /// read), earliest first; each checked again as it comes (a nested run
    /// may have fired or removed it).
    mutating func doTimers() {
        let limit = now + 1e-9
        let armedBefore = armed
        armed = nil
        let due = model.timers.indices.filter {
            model.timers[$0].valid && model.timers[$0].modes.contains(mode) && model.timers[$0].next <= limit
        }.sorted { model.timers[$0].next < model.timers[$1].next }
        // The modes whose timerfd CF re-arms, armed once at the end (each
        // fire's own re-arm would cost a pass over every timer).
        var rearm: Set<String> = [mode]
        // The date CF last armed the mode's timerfd at (`_timerHardDeadline`).
        var remembered = armedBefore
        for index in due where model.timers[index].valid && !model.timers[index].firing {
            guard model.timers[index].next <= limit, stuck == nil else { continue }
            // The budget is checked before each fire, not only after the
            // pass: n timers due together cost n scans of n, and a pass
            // begun with its last steps would spend all of them (90,301
            // steps for 300 timers). The run is given up after this pass.
            guard budget.left > 0 else {
                outOfBudget = true
                break
            }
            // Before each fire CF arms the timerfd at the mode's next timer,
            // the firing one left out, if that date changed: a timer due in
            // this same batch makes it readable again at once, and once the
            // batch leaves no timer CF never disarms it: the loop wakes for
            // nothing at its next sleep.
            // One scan, no array: with n timers due together this runs n times
            // a pass, and the scans are charged to the call's budget (a pass
            // alone is charged once per item), so a loop of many due timers
            // gives up as soon as its work is spent, not n times later.
            var othersNext: Double?
            for (other, timer) in model.timers.enumerated()
            where other != index && timer.valid && !timer.firing && timer.modes.contains(mode) {
                othersNext = min(othersNext ?? timer.next, timer.next)
            }
            budget.left -= model.timers.count
            if let next = othersNext, next != remembered {
                remembered = next
                arm(mode, at: next, byLoop: true)
            }
            rearm.formUnion(fire(index))
        }
        armNext(in: rearm)
    }

    /// `__CFRunLoopDoTimer`: the fire's callout (a nested run inside it sees
    /// the timer still in its modes but never fires it), then CF moves a
    /// repeating timer to the next point of its grid after now, or
    /// invalidates a one-shot one. Returns the modes whose timerfd CF
    /// re-arms (the timer's own; re-armed here already around a nested run).
    private mutating func fire(_ index: Int) -> Set<String> {
        model.timers[index].fires += 1
        timerFires += 1
        let timer = model.timers[index]
        var oneShot = false
        var maxedOut = false
        var ref = CalloutRef(kind: .timer, id: timer.id, selector: timer.selector)
        if timer.perform {
            oneShot = true
            removed(
                "perform", timer.id, how: "fired after its delay (its one-shot timer left the mode)",
                from: timer.modeNames)
            ref = CalloutRef(kind: .perform, id: timer.id, selector: timer.selector)
            ref.throughTimer = true
        } else {
            let prefix = timer.role == .keepAlive ? "(the keep-alive timer) " : ""
            if let max = timer.maxFires, timer.fires >= max {
                // runloopd invalidates it before its action runs.
                model.timers[index].valid = false
                maxedOut = true
                removed(
                    "timer", timer.id, how: prefix + "was invalidated after its last fire (maxFires \(timer.fires))",
                    from: timer.modeNames)
            } else if timer.interval == nil {
                oneShot = true
                removed(
                    "timer", timer.id, how: prefix + "fired once (CF invalidates a one-shot timer after its fire)",
                    from: timer.modeNames)
            }
        }
        if let run = timer.nested {
            // CF arms the mode's timerfd for the next timer before the
            // callout (every mode's, after runloopd's invalidation).
            model.timers[index].firing = true
            armNext(in: maxedOut ? timer.modes.union([mode]) : [mode])
            callout(ref, nested: run)
            model.timers[index].firing = false
        } else {
            callout(ref)
        }
        if oneShot {
            model.timers[index].valid = false
        } else if model.timers[index].valid, let interval = timer.interval {
            // The next point of its grid after now (CF never fires twice to catch up).
            let skipped = ((now - model.timers[index].next) / interval).rounded(.down)
            model.timers[index].next += interval * (skipped + 1)
        }
        if timer.nested != nil { armNext(in: timer.modes) }
        return timer.modes
    }

    /// `__CFRunLoopDoSource1`: the port's perform routine drains every
    /// queued message in one callout.
    mutating func doSource1(_ index: Int) -> Bool {
        model.sources[index].queued = 0
        portSince[index] = nil
        let source = model.sources[index]
        callout(CalloutRef(kind: .port, id: source.id, selector: source.selector), nested: source.nested)
        return true
    }

    // MARK: - Callouts, observers, turns

    /// A callout; `nested`: the run it starts (and returns from) before it ends.
    mutating func callout(_ ref: CalloutRef, nested run: LoopModel.NestedRun? = nil) {
        if turn.afterWake && turn.wokeBy == nil && ref.kind != .observer && ref.kind != .task {
            turn.wokeBy = WokeBy(kind: WakeKind(rawValue: ref.kind.rawValue) ?? .wakeup, id: ref.id)
        }
        if let run { playNested(run, from: ref) }
        turn.callouts.append(ref)
        if ref.countsAsSource {
            lastSource = ref
            passSources.append(ref)
        }
        if ref.selector == "stop" {
            stopped = true
            stopBy = .selector(callout: ref)
            wakeFromLoop()
        }
    }

    /// `wake()` made by a callout on the loop's own thread.
    mutating func wakeFromLoop() {
        let before = wakeSince
        wake()
        if before == nil && wakeSince != nil { wakeByLoop = true }
    }

    /// `__CFRunLoopDoObservers`: the mode's observers of `activity`, by order.
    mutating func notify(_ activity: Activity) {
        let indices = model.observers.indices.filter {
            let o = model.observers[$0]
            return o.valid && !o.firing && o.activities.contains(activity) && o.modes.contains(mode)
        }.sorted { model.observers[$0].order < model.observers[$1].order }
        // CF collects them first, then calls each still valid (a nested run
        // an earlier one started may have invalidated it).
        for index in indices where model.observers[index].valid {
            if !model.observers[index].repeats { model.observers[index].valid = false }
            let observer = model.observers[index]
            model.observers[index].firing = true
            callout(CalloutRef(kind: .observer, id: observer.id, selector: observer.selector), nested: observer.nested)
            model.observers[index].firing = false
            // The `signal` selector (a source of this loop): as from outside,
            // but its wake-up comes after all that was ready at this moment.
            if let (source, wakeUp) = observer.signals {
                let valid = model.sources.contains { $0.id == source && $0.valid }
                apply(.signal(source: source, wakeUp: false))
                if wakeUp && valid { wakeFromLoop() }
            }
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

    /// Records the invalidation of a source or a timer; runloopd's own
    /// keep-alive (`keepAlive`: "port" or "timer") is named as such.
    mutating func invalidated(_ kind: String, _ id: String, role: ItemRole, keepAlive: String, from names: [String]) {
        let how = role == .keepAlive ? "(the keep-alive \(keepAlive)) was invalidated" : "was invalidated"
        removed(kind, id, how: how, from: names)
    }

    /// `CFRunLoopWakeUp`: the wake-up descriptor is readable from now on
    /// (a second wake-up before CF reads it changes nothing).
    mutating func wake() {
        if wakeSince == nil && !ignoringWakeUps {
            (wakeSince, wakeByLoop) = (now, false)
            sequence += 1
            wakeSequence = sequence
        }
    }

    mutating func apply(_ kind: Stimulus.Kind) {
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
                invalidated("source", id, role: source.role, keepAlive: "port", from: source.modeNames)
            }
            if wake { self.wake() }
        case .invalidateTimer(let id, let wake):
            if let index = model.timers.firstIndex(where: { $0.id == id && $0.valid }) {
                model.timers[index].valid = false
                let timer = model.timers[index]
                invalidated("timer", id, role: timer.role, keepAlive: "timer", from: timer.modeNames)
                armNext(in: timer.modes, byLoop: false)
            }
            if wake { self.wake() }
        case .removeSourceMode(let id, let name, let wake):
            // runloopd refuses it for an invalidated source or one not in the mode.
            if let index = model.sources.firstIndex(where: { $0.id == id && $0.valid }),
                model.sources[index].modeNames.contains(name)
            {
                model.sources[index].modeNames.removeAll { $0 == name }
                model.sources[index].modes = model.expand(model.sources[index].modeNames)
                removed("source", id, how: "was removed from the mode", from: [name])
                if wake { self.wake() }
            }
        case .invalidateObserver(let id):
            if let index = model.observers.firstIndex(where: { $0.id == id }) { model.observers[index].valid = false }
        case .perform(let perform):
            // A carrier already signalled is not signalled (nor the loop
            // woken) again: a burst of performs costs one wake-up.
            let wakes = perform.keys.contains { carriers[$0] != true }
            model.performs.append(perform)
            model.everFilled.formUnion(model.expand(perform.keys))
            for key in perform.keys { carriers[key] = true }
            if wakes { wake() }
        case .performBlock(let block):
            model.blocks.append(block)
            // Something was added to its modes: emptied later, a run there
            // finishes with mode_empty, not mode_missing.
            model.everFilled.formUnion(model.expand(block.keys))
            wake()
        case .cancelDelayed(let ids):
            for index in model.timers.indices
            where model.timers[index].perform && model.timers[index].valid && ids.contains(model.timers[index].id) {
                model.timers[index].valid = false
                removed(
                    "perform", model.timers[index].id, how: "was cancelled before its delay passed",
                    from: model.timers[index].modeNames)
                armNext(in: model.timers[index].modes, byLoop: false)
            }
        }
    }
}
