import CFOracle
import Foundation

@testable import RunLoopCore

/// The third answer of the predict differential (issue 38): each generated
/// setup as plain JSON for `CFOracle`, which plays it on plain CF, and the
/// comparison of what CF did with what `/predict` said.
extension PredictSetup {
    /// The setup as the oracle reads it (items named by kind and index).
    var oracleSetup: OracleSetup {
        func action(_ call: SelectorCall?) -> OracleSetup.Action? {
            guard let call else { return nil }
            switch call.selector {
            case "stop": return .init(kind: "stop")
            case "runNested":
                return .init(
                    kind: "runNested", mode: call.args["mode"]?.string ?? "default",
                    slots: Int(((call.args["seconds"]?.number ?? 0) / Self.quantum).rounded()),
                    returnAfterSourceHandled: call.args["returnAfterSourceHandled"]?.bool ?? false)
            default: return .init(kind: "count")
            }
        }
        return OracleSetup(
            quantum: Self.quantum, keepAlive: keepAlive.rawValue, runMode: runMode, trackingIsCommon: trackingIsCommon,
            startSlot: startSlot, deadlineSlot: deadlineSlot, returnAfterSourceHandled: returnAfterSourceHandled,
            nested: nested,
            timers: timers.enumerated().map { index, plan in
                .init(
                    modes: plan.modes, firstSlot: plan.firstSlot, intervalSlots: plan.intervalSlots,
                    maxFires: plan.maxFires, invalidated: plan.invalidated,
                    action: plan.stop ? .init(kind: "stop") : action(calloutCall(.timer(index))))
            },
            sources: sources.enumerated().map { index, plan in
                .init(
                    port: plan.port, modes: plan.modes, order: plan.order, signalled: plan.signalled,
                    wakeUp: plan.wakeUp, messages: plan.messages,
                    messageSlots: preMessages.filter { $0.source == index }.map(\.slot),
                    action: action(calloutCall(.source(index))))
            },
            performs: performs.enumerated().map { index, plan in
                .init(
                    keys: plan.keys, delaySlot: plan.delaySlot, cancelled: plan.cancelled,
                    action: action(calloutCall(.perform(index)) ?? PredictHarness.call(stop: plan.stop, name: "p")),
                    block: plan.block ? true : nil)
            },
            observers: observers.map { plan in
                let act: OracleSetup.Action? =
                    switch plan.action {
                    case .stop?: .init(kind: "stop")
                    case .signal(let source, let wakeUp)?: .init(kind: "signal", source: source, wakeUp: wakeUp)
                    case .runNested(let mode, let slots, let rash)?:
                        .init(kind: "runNested", mode: mode, slots: slots, returnAfterSourceHandled: rash)
                    case nil: nil
                    }
                return .init(
                    activities: plan.activities.map(\.rawValue), repeats: plan.repeats, mode: plan.mode,
                    order: plan.order, action: act)
            },
            stimuli: stimuli.map { slot, what in
                switch what {
                case .stop: return .init(slot: slot, kind: "stop")
                case .wakeUp: return .init(slot: slot, kind: "wakeUp")
                case .signal(let source, let wakeUp):
                    return .init(slot: slot, kind: "signal", index: source, wakeUp: wakeUp)
                case .message(let source): return .init(slot: slot, kind: "message", index: source)
                case .invalidateSource(let source, let wakeUp):
                    return .init(slot: slot, kind: "invalidateSource", index: source, wakeUp: wakeUp)
                case .invalidateTimer(let timer, let wakeUp):
                    return .init(slot: slot, kind: "invalidateTimer", index: timer, wakeUp: wakeUp)
                case .removeSource(let source, let mode, let wakeUp):
                    return .init(slot: slot, kind: "removeSource", index: source, wakeUp: wakeUp, keys: [mode])
                case .invalidateObserver(let observer):
                    return .init(slot: slot, kind: "invalidateObserver", index: observer)
                case .perform(let keys, let stop): return .init(slot: slot, kind: "perform", keys: keys, stop: stop)
                case .block(let keys, let stop):
                    return .init(slot: slot, kind: "perform", keys: keys, stop: stop, block: true)
                case .cancelDelayed(let perform): return .init(slot: slot, kind: "cancelDelayed", index: perform)
                }
            })
    }
}

extension PredictHarness {
    /// runloopd's ids (and the stimuli's placeholders) → the oracle's names.
    static func labels(_ built: Built, placeholders: [String]) -> [String: String] {
        var out: [String: String] = [:]
        for (index, id) in built.timers.enumerated() { out[id] = "t\(index)" }
        for (index, id) in built.sources.enumerated() { out[id] = "s\(index)" }
        for (index, id) in built.performs.enumerated() { out[id] = "p\(index)" }
        for (index, id) in built.observers.enumerated() { out[id] = "o\(index)" }
        for (index, id) in placeholders.enumerated() { out[id] = "x\(index)" }
        return out
    }

    /// A predicted run in the oracle's words.
    static func oracleRun(_ p: Prediction, label: (String) -> String) -> OracleResult.Run {
        let reason = p.exitReason?.name ?? "none"
        var stopper: String?
        if reason == "stopped", let cause = p.cause {
            if cause.code == "stop_request" {
                stopper = "outside"
            } else if case .object(let by)? = cause.details["by"], let kind = by["kind"]?.string,
                let id = by["id"]?.string
            {
                stopper = "\(kind) \(label(id))"
            }
        }
        var handled: [String] = []
        if reason == "handledSource", let details = p.cause?.details {
            if case .array(let items)? = details["handled"] {
                handled = items.compactMap { item in
                    guard case .object(let f) = item, let kind = f["kind"]?.string, let id = f["id"]?.string else {
                        return nil
                    }
                    return "\(kind) \(label(id))"
                }
            } else if let kind = details["kind"]?.string,
                let id = details["perform"]?.string ?? details["source"]?.string
            {
                handled = ["\(kind) \(label(id))"]
            }
        }
        let turns = p.turns.map { turn in
            let woke: String
            switch turn.wokeBy.kind {
            case .wakeup, .timeout: woke = turn.wokeBy.kind.rawValue
            default: woke = turn.wokeBy.id.map { "\(turn.wokeBy.kind.rawValue) \(label($0))" } ?? "none"
            }
            return OracleResult.Turn(
                wokeBy: woke, callouts: turn.callouts.map { "\($0.kind.rawValue) \(label($0.id))" },
                end: turn.end.rawValue)
        }
        return OracleResult.Run(exitReason: reason, stopper: stopper, handled: handled, turns: turns, ms: p.atMs ?? -1)
    }

    /// Where plain CF and the prediction disagree (the time is not compared:
    /// the oracle's run is another run; the slots make the order certain).
    static func compareOracle(_ p: Prediction, _ cf: OracleResult, label: (String) -> String) -> [String] {
        var out: [String] = []
        func one(_ predicted: OracleResult.Run, _ real: OracleResult.Run, _ name: String) {
            if predicted.exitReason != real.exitReason {
                out.append("\(name)exitReason: predicted \(predicted.exitReason), plain CF \(real.exitReason)")
            }
            if predicted.stopper != real.stopper {
                out.append(
                    "\(name)stopper: predicted \(predicted.stopper ?? "none"), plain CF \(real.stopper ?? "none")")
            }
            if real.exitReason == "handledSource", predicted.handled != real.handled {
                out.append("\(name)handled: predicted \(predicted.handled), plain CF \(real.handled)")
            }
            let describe: (OracleResult.Turn) -> String = {
                "[\($0.wokeBy): \($0.callouts.joined(separator: ", ")) | \($0.end)]"
            }
            if predicted.turns != real.turns {
                out.append(
                    "\(name)turns: predicted \(predicted.turns.map(describe)), plain CF \(real.turns.map(describe))")
            }
        }
        one(oracleRun(p, label: label), cf.run, "plain CF: ")
        if p.nested.count != cf.nested.count {
            out.append("plain CF: nested runs: predicted \(p.nested.count), plain CF \(cf.nested.count)")
        }
        for (index, (predicted, real)) in zip(p.nested, cf.nested).enumerated() {
            one(oracleRun(predicted, label: label), real, "plain CF nested run \(index + 1): ")
        }
        return out
    }
}
