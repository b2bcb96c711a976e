import Foundation
import RunLoopCore

/// How engine values look in JSON: the field names `openapi.json` documents.
enum Rep {
    static func exit(_ exit: RunExit?) -> Value {
        guard let exit else { return .null }
        return [
            "exitReason": .string(exit.reason.name), "code": .number(Double(exit.reason.code)),
            "mode": .string(exit.mode), "durationMs": .number(ms(exit.duration)),
            "at": Timestamp.value(exit.endedAt), "run": .number(Double(exit.run)), "depth": .number(Double(exit.depth)),
            "cause": cause(exit.cause),
        ]
    }

    /// Milliseconds rounded to microseconds.
    static func ms(_ seconds: Double) -> Double { (seconds * 1_000_000).rounded() / 1000 }

    /// `value` rounded to three decimals (seconds to milliseconds, milliseconds to microseconds).
    static func rounded3(_ value: Double) -> Double { (value * 1000).rounded() / 1000 }

    static func round3(_ value: Double?) -> Value {
        value.map { .number(rounded3($0)) } ?? .null
    }

    static func policy(_ policy: RunPolicy) -> Value {
        [
            "style": .string(policy.style.rawValue), "mode": .string(policy.mode.name),
            "seconds": .number(policy.seconds), "distantFuture": .bool(policy.isDistantFuture),
            "returnAfterSourceHandled": .bool(policy.returnAfterSourceHandled),
        ]
    }

    static func call(_ call: SelectorCall?) -> Value {
        guard let call else { return .null }
        return ["selector": .string(call.selector), "args": .object(call.args)]
    }

    /// An action's last result: `{ok, result, error}`, or null before it ran.
    static func actionResult(_ result: Result<Value, RunLoopError>?) -> Value {
        switch result {
        case nil: .null
        case .success(let value)?: ["ok": true, "result": value, "error": .null]
        case .failure(let e)?: ["ok": false, "result": .null, "error": error(e)]
        }
    }

    static func pending(_ perform: PerformSnapshot) -> Value {
        [
            "performId": .string(perform.id), "selector": .string(perform.call.selector),
            "args": .object(perform.call.args), "modes": .array(perform.modes.map(Value.string)),
            "queuedAt": Timestamp.value(perform.queuedAt),
            "afterDelay": perform.delayed ? .number(perform.afterDelay) : .null,
            "fireAt": Timestamp.value(perform.fireAt), "state": .string(perform.delayed ? "delayed" : "pending"),
            "overdueMs": overdueMs(perform.delayed ? perform.fireAt : nil), "via": .string(perform.via.rawValue),
        ]
    }

    /// How long past its fire date a delayed perform still waits (null when it
    /// is not due yet or not delayed): its afterDelay timer fires only while
    /// the loop runs in one of its modes.
    static func overdueMs(_ fireAt: Date?) -> Value {
        guard let fireAt else { return .null }
        let late = Date().timeIntervalSince(fireAt)
        return late > 0 ? round3(late * 1000) : .null
    }

    /// What an overdue delayed perform's answer says.
    static let overdueNote =
        "overdue: its afterDelay timer is due but has not fired, because the thread's loop is not running in the perform's modes (a manual thread runs only when asked)"

    /// Where a perform is followed: `GET /api/threads/{id}/performs/{pid}`.
    static func performPath(thread: String, _ performId: String) -> String {
        "/api/threads/\(thread)/performs/\(performId)"
    }

    /// A 202 for a perform accepted and not answered (yet): its id, state and where to follow it.
    static func performAccepted(
        _ performId: String, thread: String, selector: String, state: PerformState, extra: [String: Value]
    ) -> Value {
        var object: [String: Value] = [
            "performId": .string(performId), "thread": .string(thread), "selector": .string(selector),
            "state": .string(state.rawValue), "follow": .string(performPath(thread: thread, performId)),
        ]
        object.merge(extra) { $1 }
        return .object(object)
    }

    static func performStatus(_ p: PerformStatus, thread: String) -> Value {
        var object: [String: Value] = [
            "performId": .string(p.id), "thread": .string(thread), "selector": .string(p.selector),
            "state": .string(p.state.rawValue), "result": .null, "error": .null,
            "queuedMs": round3(p.queuedMs), "ranMs": round3(p.ranMs), "finishedAt": Timestamp.value(p.finishedAt),
            "overdueMs": overdueMs(p.state == .delayed ? p.fireAt : nil),
        ]
        if object["overdueMs"] != .null { object["note"] = .string(overdueNote) }
        switch p.outcome {
        case .success(let value)?: object["result"] = value
        case .failure(let e)?: object["error"] = error(e)
        case nil: break
        }
        return .object(object)
    }

    static func thread(_ s: WorkerSnapshot) -> Value {
        var exits: [String: Value] = [:]
        for reason in ExitReason.allCases { exits[reason.name] = .number(Double(s.exits[reason] ?? 0)) }
        return [
            "id": .string(s.id), "name": .string(s.name), "threadName": .string(s.threadName),
            "threadNameTruncated": .bool(s.threadNameTruncated), "state": .string(s.state.rawValue),
            "currentMode": s.currentMode.map(Value.string) ?? .null, "depth": .number(Double(s.depth)),
            "keepAlive": .string(s.keepAlive.rawValue),
            "keepAliveSource": s.keepAlive == .port ? s.keepAliveItem.map(Value.string) ?? .null : .null,
            "keepAliveTimer": s.keepAlive == .timer ? s.keepAliveItem.map(Value.string) ?? .null : .null,
            "run": policy(s.policy), "runs": .number(Double(s.runs)), "timerFires": .number(Double(s.timerFires)),
            "exits": .object(exits), "lastExit": exit(s.lastExit), "parked": .bool(s.parked),
            "counts": [
                "timers": .number(Double(s.timers)), "sources": .number(Double(s.sources)),
                "observers": .number(Double(s.observers)), "tasks": .number(Double(s.tasks)),
                "pendingPerforms": .number(Double(s.pendingPerforms.count)),
            ],
            "pendingPerforms": .array(s.pendingPerforms.map(pending)),
            "createdAt": Timestamp.value(s.createdAt), "endedAt": Timestamp.value(s.endedAt), "ending": .bool(s.ending),
        ]
    }

    static func timer(_ t: TimerSnapshot) -> Value {
        [
            "id": .string(t.id), "role": .string(t.role.rawValue), "modes": .array(t.modes.map(Value.string)),
            "interval": .number(t.interval), "repeats": .bool(t.repeats),
            "delay": .number(t.delay), "tolerance": .number(t.tolerance), "mode": .string(t.mode),
            "valid": .bool(t.valid), "fires": .number(Double(t.fires)),
            "maxFires": t.maxFires.map { .number(Double($0)) } ?? .null, "nextFireAt": Timestamp.value(t.nextFireAt),
            "lateness": [
                "lastMs": round3(t.lateness.lastMs), "p50Ms": round3(t.lateness.p50Ms),
                "p99Ms": round3(t.lateness.p99Ms), "maxMs": round3(t.lateness.maxMs),
            ],
            "action": call(t.action), "lastActionError": t.lastActionError.map(Value.string) ?? .null,
            "createdAt": Timestamp.value(t.createdAt),
        ]
    }

    static func source(_ s: SourceSnapshot) -> Value {
        [
            "id": .string(s.id), "kind": .string(s.kind.rawValue), "role": .string(s.role.rawValue),
            "mode": .string(s.mode), "modes": .array(s.modes.map(Value.string)),
            "scheduledIn": .object(s.scheduledIn.mapValues { .number(Double($0)) }),
            "cancelledIn": .object(s.cancelledIn.mapValues { .number(Double($0)) }),
            "lastAction": actionResult(s.lastAction),
            "order": .number(Double(s.order)), "valid": .bool(s.valid), "fired": .number(Double(s.fired)),
            "scheduled": .number(Double(s.scheduled)), "cancelled": .number(Double(s.cancelled)),
            "signalled": .bool(s.signalled), "received": .number(Double(s.received)),
            "queued": .number(Double(s.queued)),
            "recentMessages": .array(
                s.recentMessages.map {
                    [
                        "msgid": .number(Double($0.msgid)), "data": .string($0.data),
                        "sentAt": Timestamp.value($0.sentAt), "receivedAt": Timestamp.value($0.receivedAt),
                    ]
                }), "action": call(s.action),
        ]
    }

    static func observer(_ o: ObserverSnapshot) -> Value {
        [
            "id": .string(o.id), "activities": .array(o.activities.map { .string($0.rawValue) }),
            "action": call(o.action), "lastResult": actionResult(o.lastResult),
            "repeats": .bool(o.repeats), "mode": .string(o.mode), "order": .number(Double(o.order)),
            "valid": .bool(o.valid), "fired": .number(Double(o.fired)),
        ]
    }

    static func activity(_ a: ActivityRecord) -> Value {
        [
            "seq": .number(Double(a.seq)), "at": Timestamp.value(a.at), "activity": .string(a.activity.rawValue),
            "code": .number(Double(a.activity.bit)), "mode": .string(a.mode), "observer": .string(a.observer),
        ]
    }

    static func modes(_ m: ModesSnapshot) -> Value {
        [
            "all": .array(m.all.map(Value.string)), "common": .array(m.common.map(Value.string)),
            "current": m.current.map(Value.string) ?? .null,
        ]
    }

    static func tasks(_ q: TaskQueueSnapshot) -> Value {
        [
            "tasks": .array(
                q.tasks.map {
                    [
                        "id": .string($0.id), "selector": .string($0.call.selector), "args": .object($0.call.args),
                        "runs": .number(Double($0.runs)), "running": .bool($0.running),
                        "addedAt": Timestamp.value($0.addedAt),
                    ]
                }), "suspended": .bool(q.suspended), "done": .number(Double(q.done)),
            "failed": .number(Double(q.failed)), "capacity": .number(Double(q.capacity)),
            "count": .number(Double(q.tasks.count)),
        ]
    }

    static func error(_ e: RunLoopError) -> Value {
        ["code": .string(e.code), "message": .string(e.message), "field": e.field.map(Value.string) ?? .null]
    }

    static func performResult(_ r: PerformResult) -> Value {
        // Sized once for all its members (a literal then a merge grew it twice).
        var object = [String: Value](minimumCapacity: 9)
        object["performId"] = .string(r.performId)
        object["thread"] = .string(r.thread)
        object["selector"] = .string(r.selector)
        object["queuedMs"] = .number(rounded3(r.queuedMs))
        object["ranMs"] = .number(rounded3(r.ranMs))
        // ok, result, error: the same shape as an action's last result.
        for (key, value) in actionResult(r.outcome).object ?? [:] { object[key] = value }
        return .object(object)
    }

    static func selector(_ s: Selector) -> Value {
        var properties: [String: Value] = [:]
        var required: [Value] = []
        for arg in s.arguments {
            var schema: [String: Value] = [
                "type": .string(arg.type == .stringList ? "array" : arg.type.rawValue),
                "description": .string(arg.summary),
            ]
            if arg.type == .stringList { schema["items"] = ["type": "string"] }
            if arg.type == .string {
                if let maxLength = arg.maximum { schema["maxLength"] = .number(maxLength) }
            } else if arg.type == .stringList {
                if let maxItems = arg.maximum { schema["maxItems"] = .number(maxItems) }
            } else {
                if let minimum = arg.minimum { schema["minimum"] = .number(minimum) }
                if let maximum = arg.maximum { schema["maximum"] = .number(maximum) }
            }
            if let d = arg.defaultValue { schema["default"] = d }
            properties[arg.name] = .object(schema)
            if arg.required { required.append(.string(arg.name)) }
        }
        return [
            "name": .string(s.name), "summary": .string(s.summary),
            "args": [
                "type": "object", "properties": .object(properties), "required": .array(required),
                "additionalProperties": .bool(s.acceptsAnyArguments),
            ],
        ]
    }
}
