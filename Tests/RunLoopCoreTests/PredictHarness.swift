import CoreFoundation
import Foundation
import Primitives

@testable import RunLoopCore

/// Builds a generated setup on a real worker, asks the predictor, runs it
/// (applying the stimuli at their slots) and compares.
struct PredictHarness {
    let registry: WorkerRegistry
    /// How far the real end may be from the predicted one (scheduling).
    static let toleranceMs = 15.0

    struct Built {
        var worker: Worker
        var anchor: Double
        var timers: [String] = []
        var sources: [String] = []
        var performs: [String] = []
    }

    /// How late a stimulus, the run's start or a timer's fire may be before
    /// the setup counts as not played as planned (and is played again).
    static let lateMs = 8.0

    /// Plays one setup; returns the disagreements (empty: it agrees), or
    /// nil when the machine could not play it on time (a stimulus, the
    /// run's start or a timer late by more than `lateMs`).
    func play(_ setup: PredictSetup) throws -> [String]? {
        var built = try build(setup)
        defer { built.worker.endAndWait(timeout: 10) }
        // Building must end well before the first slot, or its delays were cut.
        if (Monotonic.now() - built.anchor) * 1000 > PredictSetup.quantum * 1000 - Self.lateMs { return nil }
        let q = PredictSetup.quantum
        let seconds = setup.deadlineSlot == 0 ? 0 : Double(setup.deadlineSlot) * q - (Monotonic.now() - built.anchor)
        let readDate = Date()
        let model = built.worker.loopModel()
        let read = Monotonic.now()
        var placeholders: [String] = []
        let stimuli = setup.stimuli.map { slot, what in
            Stimulus(at: built.anchor + Double(slot) * q - read, stimulus(what, built, &placeholders))
        }
        let prediction = Worker.predict(
            model, mode: setup.runMode, seconds: seconds, returnAfterSourceHandled: setup.returnAfterSourceHandled,
            stimuli: stimuli)
        let box = Locked<RunExit?>(nil)
        try built.worker.run(
            mode: RunLoopMode(setup.runMode), seconds: seconds, returnAfterSourceHandled: setup.returnAfterSourceHandled
        ) { result in
            box.withLock { $0 = try? result.get() }
            box.notifyAll()
        }
        var real: [String] = []
        var lateMs = 0.0
        for (slot, what) in setup.stimuli {
            let due = built.anchor + Double(slot) * q
            let ended = box.withLock(when: { $0 != nil }, timeout: max(0, due - Monotonic.now())) { _, ready in ready }
            if ended { break }
            if let id = apply(what, &built) { real.append(id) }
            // Measured once the stimulus is done: its thread may be taken off
            // the CPU inside the call, before the signal or wake-up it makes.
            lateMs = max(lateMs, (Monotonic.now() - due) * 1000)
        }
        // A probe of the machine: the harness itself wakes at the predicted
        // end; waking late means threads were not scheduled on time.
        if let atMs = prediction.atMs {
            let target = read + atMs / 1000 + 0.001
            let ended = box.withLock(when: { $0 != nil }, timeout: max(0, target - Monotonic.now())) { _, ready in
                ready
            }
            if !ended { lateMs = max(lateMs, (Monotonic.now() - target) * 1000) }
        }
        let exit = box.withLock(when: { $0 != nil }, timeout: seconds + 10) { value, _ in value }
        guard let exit else { return ["the run did not return"] }
        let turns = built.worker.turns(matching: TurnFilter(run: exit.run)).turns
        let startMs = (exit.endedAt.timeIntervalSince(readDate) - exit.duration) * 1000
        let timerLateMs = built.timers.compactMap { try? built.worker.timerSnapshot($0).lateness.maxMs }.max() ?? 0
        // What wakes the loop (CF's timeout, delivered by a dispatch timer on
        // a utility queue; a timerfd; a stimulus) needs the loop's thread to
        // run: on a loaded machine its last wake can come late. A run that
        // ends as predicted but whose last turn began well after the
        // predicted end was not played as planned (played again; a late
        // end every time is reported).
        var timeoutLateMs = 0.0
        if exit.reason == prediction.exitReason, let atMs = prediction.atMs, let last = turns.last,
            last.wokeBy.kind != .none
        {
            timeoutLateMs = last.startedAt.timeIntervalSince(readDate) * 1000 - atMs
        }
        // Every callout here takes microseconds: a turn busy for longer had
        // its thread taken off the CPU.
        let busyMs = turns.map(\.busyMs).max() ?? 0
        if max(lateMs, startMs, timerLateMs, timeoutLateMs, busyMs) > Self.lateMs {
            if ProcessInfo.processInfo.environment["PREDICT_DEBUG"] != nil {
                print(
                    "debug \(setup.seed) late: stimuli \(lateMs), start \(startMs), timers \(timerLateMs), last wake \(timeoutLateMs), busy \(busyMs) ms"
                )
            }
            return nil
        }
        let rename: (String) -> String = { id in
            placeholders.firstIndex(of: id).flatMap { $0 < real.count ? real[$0] : nil } ?? id
        }
        if ProcessInfo.processInfo.environment["PREDICT_DEBUG"] != nil {
            print(
                "debug \(setup.seed): read at \((read - built.anchor) * 1000) ms, seconds \(seconds), exit \(exit.reason) \(exit.cause?.code ?? "") after \(exit.duration * 1000) ms, ended \(exit.endedAt.timeIntervalSince(readDate) * 1000) ms after read; predicted \(prediction.exitReason?.name ?? "-") at \(prediction.atMs ?? -1), reasons \(prediction.reasons)\n\(setup)"
            )
        }
        return compare(prediction, exit, turns, atMs: exit.endedAt.timeIntervalSince(readDate) * 1000, rename)
    }

    private func build(_ setup: PredictSetup) throws -> Built {
        let worker = try registry.createWorker(
            WorkerOptions(keepAlive: setup.keepAlive, policy: RunPolicy(style: .manual)))
        if setup.trackingIsCommon { _ = try worker.addCommonMode(RunLoopMode("tracking")) }
        var built = Built(worker: worker, anchor: Monotonic.now())
        let q = PredictSetup.quantum
        for plan in setup.timers {
            let delay = max(0, Double(plan.firstSlot) * q - (Monotonic.now() - built.anchor))
            var spec = TimerSpec(
                interval: Double(plan.intervalSlots ?? 1) * q, repeats: plan.intervalSlots != nil, delay: delay,
                mode: try RunLoopMode(plan.modes[0]), action: plan.stop ? SelectorCall(selector: "stop") : nil,
                maxFires: plan.maxFires)
            spec.tolerance = 0
            let id = try worker.addTimer(spec).id
            for extra in plan.modes.dropFirst() { _ = try worker.addTimerMode(id, mode: RunLoopMode(extra)) }
            if plan.invalidated { _ = try worker.invalidateTimer(id) }
            built.timers.append(id)
        }
        for plan in setup.sources {
            let spec = SourceSpec(
                kind: plan.port ? .port : .custom, mode: try RunLoopMode(plan.modes[0]), order: plan.order)
            let id = try worker.addSource(spec).id
            for extra in plan.modes.dropFirst() { _ = try worker.addSourceMode(id, mode: RunLoopMode(extra)) }
            for n in 0..<plan.messages { _ = try worker.sendMessage(toSource: id, msgid: n, data: "m\(n)") }
            if plan.signalled { _ = try worker.signalSource(id, wakeUp: plan.wakeUp) }
            built.sources.append(id)
        }
        for (index, plan) in setup.performs.enumerated() {
            let delay = plan.delaySlot.map { max(0, Double($0) * q - (Monotonic.now() - built.anchor)) }
            let call = Self.call(stop: plan.stop, name: "p\(index)")
            let modes = try plan.keys.map { name throws(RunLoopError) in try RunLoopMode(name) }
            let id = try worker.perform(PerformSpec(call: call, modes: modes, afterDelay: delay))
            if plan.cancelled { _ = worker.cancelDelayedPerforms(selector: call.selector, args: call.args) }
            built.performs.append(id)
        }
        for plan in setup.observers {
            _ = try worker.addObserver(
                ObserverSpec(
                    activities: plan.activities, repeats: plan.repeats, mode: try RunLoopMode(plan.mode),
                    order: plan.order))
        }
        return built
    }

    static func call(stop: Bool, name: String) -> SelectorCall {
        stop ? SelectorCall(selector: "stop") : SelectorCall(selector: "count", args: ["name": .string(name)])
    }

    static let stopOrigin = StopOrigin.request(by: "the predict test", requestId: "stimulus")

    /// The stimulus as the predictor takes it; a perform's id is not known
    /// before it is queued, so it gets a placeholder.
    private func stimulus(_ what: PredictSetup.StimulusPlan, _ built: Built, _ placeholders: inout [String])
        -> Stimulus.Kind
    {
        switch what {
        case .stop: return .stop(Self.stopOrigin)
        case .wakeUp: return .wakeUp
        case .signal(let source, let wake): return .signal(source: built.sources[source], wakeUp: wake)
        case .message(let source): return .message(source: built.sources[source])
        case .invalidateSource(let source, let wake): return .invalidateSource(built.sources[source], wakeUp: wake)
        case .invalidateTimer(let timer, let wake): return .invalidateTimer(built.timers[timer], wakeUp: wake)
        case .perform(let keys, let stop):
            let placeholder = "stim\(placeholders.count)-perform"
            placeholders.append(placeholder)
            let call = Self.call(stop: stop, name: placeholder)
            return .perform(LoopModel.Perform(id: placeholder, keys: keys, selector: call.selector))
        case .cancelDelayed(let perform): return .cancelDelayed(ids: [built.performs[perform]])
        }
    }

    /// Does the stimulus to the real worker; returns a perform's id.
    private func apply(_ what: PredictSetup.StimulusPlan, _ built: inout Built) -> String? {
        let worker = built.worker
        switch what {
        case .stop: worker.stop(origin: Self.stopOrigin) { _ in }
        case .wakeUp: try? worker.wakeUp()
        case .signal(let source, let wake): _ = try? worker.signalSource(built.sources[source], wakeUp: wake)
        case .message(let source): _ = try? worker.sendMessage(toSource: built.sources[source], msgid: 9, data: "s")
        case .invalidateSource(let source, let wake):
            _ = try? worker.invalidateSource(built.sources[source], wakeUp: wake)
        case .invalidateTimer(let timer, let wake): _ = try? worker.invalidateTimer(built.timers[timer], wakeUp: wake)
        case .perform(let keys, let stop):
            let modes = keys.compactMap { try? RunLoopMode($0) }
            return try? worker.perform(PerformSpec(call: Self.call(stop: stop, name: "stim"), modes: modes))
        case .cancelDelayed(let perform):
            let call = Self.call(stop: false, name: "p\(perform)")
            _ = worker.cancelDelayedPerforms(selector: call.selector, args: call.args)
        }
        return nil
    }
}
