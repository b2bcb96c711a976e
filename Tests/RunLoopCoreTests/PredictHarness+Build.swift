import CoreFoundation
import Foundation
import Primitives
import CFOracle
import RunLoopTestSupport

@testable import RunLoopCore

/// Building a setup's worker, items and stimuli before it is played, and
/// applying each stimulus when its time comes.
extension PredictHarness {
    func build(_ setup: PredictSetup) throws -> Built {
        let worker = try registry.createWorker(
            WorkerOptions(keepAlive: setup.keepAlive, policy: RunPolicy(style: .manual)))
        if setup.trackingIsCommon { _ = try worker.addCommonMode(RunLoopMode("tracking")) }
        var built = Built(worker: worker, anchor: Monotonic.now())
        let q = PredictSetup.quantum
        for plan in setup.timers {
            let delay = max(0, Double(plan.firstSlot) * q - (Monotonic.now() - built.anchor))
            var spec = TimerSpec(
                interval: Double(plan.intervalSlots ?? 1) * q, repeats: plan.intervalSlots != nil, delay: delay,
                mode: try RunLoopMode(plan.modes[0]),
                action: plan.stop ? SelectorCall(selector: "stop") : setup.calloutCall(.timer(built.timers.count)),
                maxFires: plan.maxFires)
            spec.tolerance = 0
            let id = try worker.addTimer(spec).id
            for extra in plan.modes.dropFirst() { _ = try worker.addTimerMode(id, mode: RunLoopMode(extra)) }
            if plan.invalidated { _ = try worker.invalidateTimer(id) }
            built.timers.append(id)
        }
        for plan in setup.sources {
            let spec = SourceSpec(
                kind: plan.port ? .port : .custom, mode: try RunLoopMode(plan.modes[0]), order: plan.order,
                action: setup.calloutCall(.source(built.sources.count)))
            let id = try worker.addSource(spec).id
            for extra in plan.modes.dropFirst() { _ = try worker.addSourceMode(id, mode: RunLoopMode(extra)) }
            for n in 0..<plan.messages { _ = try worker.sendMessage(toSource: id, msgid: n, data: "m\(n)") }
            if plan.signalled { _ = try worker.signalSource(id, wakeUp: plan.wakeUp) }
            built.sources.append(id)
        }
        for (index, plan) in setup.performs.enumerated() {
            let delay = plan.delaySlot.map { max(0, Double($0) * q - (Monotonic.now() - built.anchor)) }
            let call = setup.calloutCall(.perform(index)) ?? Self.call(stop: plan.stop, name: "p\(index)")
            let modes = try plan.keys.map { name throws(RunLoopError) in try RunLoopMode(name) }
            let id = try worker.perform(
                PerformSpec(call: call, modes: modes, afterDelay: delay, via: plan.block ? .block : .selector))
            if plan.cancelled { _ = worker.cancelDelayedPerforms(selector: call.selector, args: call.args) }
            built.performs.append(id)
        }
        for plan in setup.observers {
            let action: SelectorCall? =
                switch plan.action {
                case .stop?: SelectorCall(selector: "stop")
                case .signal(let source, let wakeUp)?:
                    SelectorCall(
                        selector: "signal", args: ["source": .string(built.sources[source]), "wakeup": .bool(wakeUp)])
                case .runNested(let mode, let slots, let rash)?:
                    PredictSetup.CalloutRunPlan(
                        from: .source(0), mode: mode, slots: slots, returnAfterSourceHandled: rash
                    ).call
                case nil: nil
                }
            let id = try worker.addObserver(
                ObserverSpec(
                    activities: plan.activities, repeats: plan.repeats, mode: try RunLoopMode(plan.mode),
                    order: plan.order, action: action)
            ).id
            built.observers.append(id)
        }
        return built
    }

    static func call(stop: Bool, name: String) -> SelectorCall {
        stop ? SelectorCall(selector: "stop") : SelectorCall(selector: "count", args: ["name": .string(name)])
    }

    static let stopOrigin = StopOrigin.request(by: "the predict test", requestId: "stimulus")

    /// The stimulus as the predictor takes it; a perform's id is not known
    /// before it is queued, so it gets a placeholder.
    func stimulus(_ what: PredictSetup.StimulusPlan, _ built: Built, _ placeholders: inout [String])
        -> Stimulus.Kind
    {
        switch what {
        case .stop: return .stop(Self.stopOrigin)
        case .wakeUp: return .wakeUp
        case .signal(let source, let wake): return .signal(source: built.sources[source], wakeUp: wake)
        case .message(let source): return .message(source: built.sources[source])
        case .invalidateSource(let source, let wake): return .invalidateSource(built.sources[source], wakeUp: wake)
        case .invalidateTimer(let timer, let wake): return .invalidateTimer(built.timers[timer], wakeUp: wake)
        case .removeSource(let source, let mode, let wake):
            return .removeSourceMode(built.sources[source], mode: mode, wakeUp: wake)
        case .invalidateObserver(let observer): return .invalidateObserver(built.observers[observer])
        case .perform(let keys, let stop):
            let placeholder = "stim\(placeholders.count)-perform"
            placeholders.append(placeholder)
            let call = Self.call(stop: stop, name: placeholder)
            return .perform(LoopModel.Perform(id: placeholder, keys: keys, selector: call.selector))
        case .block(let keys, let stop):
            let placeholder = "stim\(placeholders.count)-perform"
            placeholders.append(placeholder)
            let call = Self.call(stop: stop, name: placeholder)
            return .performBlock(LoopModel.Perform(id: placeholder, keys: keys, selector: call.selector))
        case .cancelDelayed(let perform): return .cancelDelayed(ids: [built.performs[perform]])
        }
    }

    /// Does the stimulus to the real worker; returns a perform's id.
    func apply(_ what: PredictSetup.StimulusPlan, _ built: inout Built) -> String? {
        let worker = built.worker
        switch what {
        case .stop:
            let refused = built.refused
            built.stopsMade.withLock { $0.append(Date()) }
            worker.stop(origin: Self.stopOrigin) { result in
                guard case .failure(let error) = result else { return }
                let notRunning = "\(error)".hasPrefix("not_running")
                refused.withLock { $0.append((Date(), notRunning, "\(error)")) }
            }
        case .wakeUp: try? worker.wakeUp()
        case .signal(let source, let wake): _ = try? worker.signalSource(built.sources[source], wakeUp: wake)
        case .message(let source): _ = try? worker.sendMessage(toSource: built.sources[source], msgid: 9, data: "s")
        case .invalidateSource(let source, let wake):
            _ = try? worker.invalidateSource(built.sources[source], wakeUp: wake)
        case .invalidateTimer(let timer, let wake): _ = try? worker.invalidateTimer(built.timers[timer], wakeUp: wake)
        case .removeSource(let source, let mode, let wake):
            guard let mode = try? RunLoopMode(mode) else { return nil }
            _ = try? worker.removeSourceMode(built.sources[source], mode: mode, wakeUp: wake)
        case .invalidateObserver(let observer): _ = try? worker.invalidateObserver(built.observers[observer])
        case .perform(let keys, let stop):
            let modes = keys.compactMap { try? RunLoopMode($0) }
            return try? worker.perform(PerformSpec(call: Self.call(stop: stop, name: "stim"), modes: modes))
        case .block(let keys, let stop):
            let modes = keys.compactMap { try? RunLoopMode($0) }
            return try? worker.perform(
                PerformSpec(call: Self.call(stop: stop, name: "stim"), modes: modes, via: .block))
        case .cancelDelayed(let perform):
            let call = Self.call(stop: false, name: "p\(perform)")
            _ = worker.cancelDelayedPerforms(selector: call.selector, args: call.args)
        }
        return nil
    }
}
