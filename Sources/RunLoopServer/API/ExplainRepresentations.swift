import Foundation
import RunLoopCore

/// JSON shapes of the explainer: exit causes, turns, warnings, stalls, load,
/// and what keeps a loop alive.
extension Rep {
    static func cause(_ cause: ExitCause?) -> Value {
        guard let cause else { return .null }
        var object = cause.details
        object["code"] = .string(cause.code)
        object["message"] = .string(cause.message)
        return .object(object)
    }

    static func turn(_ t: TurnRecord) -> Value {
        var woke: [String: Value] = ["kind": .string(t.wokeBy.kind.rawValue)]
        if let id = t.wokeBy.id { woke["id"] = .string(id) }
        return [
            "turn": .number(Double(t.turn)), "run": .number(Double(t.run)), "depth": .number(Double(t.depth)),
            "mode": .string(t.mode), "startedAt": Timestamp.value(t.startedAt), "wokeBy": .object(woke),
            "sleptMs": round3(t.sleptMs), "busyMs": round3(t.busyMs),
            "callouts": .array(t.callouts.map(callout)), "droppedCallouts": .number(Double(t.droppedCallouts)),
            "end": .string(t.end.rawValue),
        ]
    }

    static func callout(_ c: Callout) -> Value {
        var object: [String: Value] = [
            "kind": .string(c.ref.kind.rawValue), "id": .string(c.ref.id), "ms": round3(c.ms),
        ]
        if let selector = c.ref.selector { object["selector"] = .string(selector) }
        return .object(object)
    }

    static func calloutRef(_ c: CalloutRef) -> Value {
        [
            "kind": .string(c.kind.rawValue), "id": .string(c.id),
            "selector": c.selector.map(Value.string) ?? .null,
        ]
    }

    static func warning(_ w: LoopWarning) -> Value {
        [
            "code": .string(w.code), "severity": .string(w.severity), "thread": .string(w.thread),
            "subjects": .array(w.subjects.map(Value.string)), "message": .string(w.message),
            "details": .object(w.details), "firstAt": Timestamp.value(w.firstAt), "lastAt": Timestamp.value(w.lastAt),
            "count": .number(Double(w.count)), "active": .bool(w.active),
        ]
    }

    static func stall(_ s: Stall, change: String?) -> Value {
        var object: [String: Value] = [
            "thread": .string(s.thread), "stall": .string(s.id), "callout": calloutRef(s.callout),
            "severity": .string(s.severity), "ms": .number(s.ms.rounded()),
        ]
        if let change { object["change"] = .string(change) }
        return .object(object)
    }

    static func stat(_ s: LoadStats.Stat) -> Value {
        ["count": .number(Double(s.count)), "last": round3(s.last), "mean": round3(s.mean), "max": round3(s.max)]
    }

    static func load(_ l: LoadSnapshot) -> Value {
        var wakeups: [String: Value] = [:]
        for kind in WakeKind.allCases { wakeups[kind.rawValue] = .number(Double(l.stats.wakeups[kind] ?? 0)) }
        return [
            "utilization": round3(l.utilization), "windowSeconds": .number(l.window),
            "coveredSeconds": round3(l.coveredSeconds),
            "lifetimeUtilization": round3(l.lifetimeUtilization), "busyMs": round3(l.stats.busyMs),
            "sleptMs": round3(l.stats.sleptMs), "turns": .number(Double(l.stats.turns)),
            "wakeups": .object(wakeups), "dispatchMs": stat(l.stats.dispatch),
            "lag": ["timerMs": stat(l.stats.timerLag), "performMs": stat(l.stats.performLag)],
        ]
    }

    /// A thread as listed, with its load and warnings.
    static func explainedThread(_ worker: Worker, load known: LoadSnapshot? = nil) -> Value {
        var object = thread(worker.snapshot).object ?? [:]
        object["load"] = load(known ?? worker.load())
        object["warnings"] = .array(worker.warnings().map(warning))
        return .object(object)
    }

    static func why(_ w: WhySnapshot) -> Value {
        let modes: [Value] = w.modes.map { m in
            [
                "mode": .string(m.mode), "running": .bool(m.running),
                "sources": .array(
                    m.sources.map { ["id": .string($0.id), "kind": "custom", "signalled": .bool($0.signalled)] }),
                "ports": .array(
                    m.ports.map {
                        ["id": .string($0.id), "keepAlive": .bool($0.keepAlive), "messagesQueued": .bool($0.signalled)]
                    }),
                "timers": .array(
                    m.timers.map {
                        [
                            "id": .string($0.id), "nextFireAt": Timestamp.value($0.nextFireAt),
                            "inMs": $0.inSeconds.map { .number(($0 * 1000).rounded()) } ?? .null,
                            "repeats": .bool($0.repeats), "keepAlive": .bool($0.keepAlive),
                        ]
                    }),
                "performs": .array(
                    m.performs.map {
                        ["performId": .string($0.id), "selector": .string($0.selector), "delayed": .bool($0.delayed)]
                    }),
                "observers": .number(Double(m.observers)), "verdict": .string(m.verdict),
                "prediction": m.prediction.map(prediction) ?? .null,
            ]
        }
        return [
            "thread": .string(w.thread), "state": .string(w.state.rawValue),
            "currentMode": w.currentMode.map(Value.string) ?? .null, "verdict": .string(w.verdict),
            "modes": .array(modes),
        ]
    }
}
