import CoreFoundation
import Foundation

/// Predict, then run: what a run would return, from the loop's state now,
/// without touching the loop.
extension Worker {
    /// What `CFRunLoopRunInMode(mode, seconds, returnAfterSourceHandled)`
    /// started now would return. Validates as `run` does (a mode to run in,
    /// seconds within the limits, a thread still alive). `stimuli`: what
    /// will happen to the loop from outside meanwhile (a test's stops,
    /// signals, messages), at seconds from now.
    public func predict(
        mode: RunLoopMode, seconds: Double, returnAfterSourceHandled: Bool, stimuli: [Stimulus] = [],
        phaseKnown: Bool = false
    ) throws(RunLoopError) -> Prediction {
        guard !mode.isCommon else {
            throw .badValue("mode", "a loop runs in one mode; common is a set of modes, not a mode to run in")
        }
        try limits.checkSeconds(seconds, field: "seconds")
        try book.withLock { b throws(RunLoopError) in try b.checkAlive(id) }
        let budget = requestBudget()
        defer { account(budget) }
        return Predictor.predict(
            loopModel(), mode: mode.name, seconds: seconds, returnAfterSourceHandled: returnAfterSourceHandled,
            stimuli: stimuli, budget: budget, phaseKnown: phaseKnown)
    }

    /// What the next run of the thread's own style (`ownRun`) would
    /// return, played as if it began now: for a thread inside its run, that
    /// run from here on.
    public func predictOwnRun() throws(RunLoopError) -> Prediction {
        try book.withLock { b throws(RunLoopError) in try b.checkAlive(id) }
        var model = loopModel()
        let inRun = model.depth > 0
        model.depth = 0
        let own = ownRun
        let budget = requestBudget()
        defer { account(budget) }
        var prediction = Predictor.predict(
            model, mode: own.mode.name, seconds: own.seconds, returnAfterSourceHandled: own.returnAfterSourceHandled,
            budget: budget)
        prediction.reasons.insert(
            "\(id) runs \(policy.style.cocoaName): "
                + (inRun ? "its run under way, played from now" : "its next run, played as if it began now"), at: 0)
        return prediction
    }

    /// Whether a manual thread has a requested run waiting or under way.
    public var hasRequestedRun: Bool { book.withLock { $0.manualRequest != nil } }

    /// The run the thread's own style makes next (loop, forever, the
    /// Cocoa styles): its mode, seconds and flag.
    public var ownRun: (mode: RunLoopMode, seconds: Double, returnAfterSourceHandled: Bool) {
        switch policy.style {
        case .forever: return (.default, RunPolicy.distantFuture, false)
        case .run: return (.default, RunPolicy.distantFuture, true)
        case .runUntilDate: return (.default, policy.seconds, true)
        case .runModeOnce: return (policy.mode, policy.seconds, true)
        case .loop, .manual: return (policy.mode, policy.seconds, policy.returnAfterSourceHandled)
        }
    }

    /// `Predictor.predict`: the model's answer on a snapshot, under the
    /// name it had when the model lived in the engine.
    public static func predict(
        _ model: LoopModel, mode: String, seconds: Double, returnAfterSourceHandled: Bool,
        stimuli: [Stimulus] = [], margin: Double = 0.002, budget: PredictBudget = PredictBudget(),
        phaseKnown: Bool = true
    ) -> Prediction {
        Predictor.predict(
            model, mode: mode, seconds: seconds, returnAfterSourceHandled: returnAfterSourceHandled,
            stimuli: stimuli, margin: margin, budget: budget, phaseKnown: phaseKnown)
    }

    /// `Predictor.phasesNotPlayed`, under its old name.
    public static let phasesNotPlayed = Predictor.phasesNotPlayed

    /// What a `signal` action on this loop does: the source, and its wake-up.
    /// (One aimed at another thread's loop changes nothing here.)
    func signalAction(_ call: SelectorCall?) -> (source: String, wakeUp: Bool)? {
        guard let call, call.selector == "signal", let source = call.args["source"]?.string else { return nil }
        if let thread = call.args["thread"]?.string, thread != id { return nil }
        return (source, call.args["wakeup"]?.bool ?? true)
    }

    /// The loop's state as the predictor reads it: one read of the book,
    /// then the records' own reads (CF validity, fire dates, modes) after
    /// the lock, as `why()` does.
    public func loopModel() -> LoopModel {
        let (timers, sources, observers, pending, delayed, common, everFilled, depth, stale) = book.withLock { b in
            (
                b.timers.all, b.sources.all, b.observers.all, b.performs.pending.map(\.request) + b.performs.blocks,
                b.performs.delayedTimers, b.commonModes, b.everFilled, b.runStack.count, b.timerfdStale
            )
        }
        var model = LoopModel(commonModes: common, depth: depth)
        model.everFilled = model.expand(Array(everFilled))
        let now = CFAbsoluteTimeGetCurrent()
        model.staleTimerfd = stale.mapValues { $0 - now }
        for timer in timers where timer.isValid {
            let snap = timer.snapshot
            guard let next = snap.nextFireAt else { continue }
            model.timers.append(
                LoopModel.Timer(
                    id: timer.id, modeNames: snap.modes, modes: model.expand(snap.modes),
                    next: next.timeIntervalSinceReferenceDate - now, interval: snap.repeats ? snap.interval : nil,
                    fires: snap.fires, maxFires: snap.maxFires, role: snap.role, selector: snap.action?.selector,
                    nested: LoopModel.NestedRun(snap.action)))
        }
        for (request, timer) in delayed where CFRunLoopTimerIsValid(timer) {
            let names = request.modes.map(\.name)
            model.timers.append(
                LoopModel.Timer(
                    id: request.id, modeNames: names, modes: model.expand(names),
                    next: CFRunLoopTimerGetNextFireDate(timer) - now, interval: nil, role: .performDelay,
                    selector: request.call.selector, perform: true, nested: LoopModel.NestedRun(request.call)))
        }
        for source in sources where source.isValid {
            let snap = source.snapshot
            model.sources.append(
                LoopModel.Source(
                    id: source.id, port: snap.kind == .port, modeNames: snap.modes, modes: model.expand(snap.modes),
                    order: snap.order, signalled: snap.signalled, queued: snap.queued,
                    selector: snap.action?.selector, role: snap.role, nested: LoopModel.NestedRun(snap.action),
                    readySince: snap.queuedSince.map { $0.timeIntervalSinceReferenceDate - now }))
        }
        for request in pending where request.viaBlock {
            model.blocks.append(Self.blockModel(request))
        }
        for request in pending where !request.viaBlock {
            model.performs.append(
                LoopModel.Perform(
                    id: request.id, keys: request.modes.map(\.name), selector: request.call.selector,
                    nested: LoopModel.NestedRun(request.call)))
        }
        for observer in observers where observer.isLive {
            let snap = observer.snapshot
            guard snap.valid else { continue }
            model.observers.append(
                LoopModel.Observer(
                    id: snap.id, activities: Set(snap.activities), repeats: snap.repeats,
                    modes: model.expand([snap.mode]), order: snap.order, selector: snap.action?.selector,
                    signals: signalAction(snap.action), nested: LoopModel.NestedRun(snap.action)))
        }
        return model
    }
}

extension Worker {
    /// A block perform as the predictor reads it.
    static func blockModel(_ request: PerformRequest) -> LoopModel.Perform {
        LoopModel.Perform(
            id: request.id, keys: request.modes.map(\.name), selector: request.call.selector,
            nested: LoopModel.NestedRun(request.call))
    }
}
