import Foundation
import RunLoopCore

/// `GET /api/setup`: the live state as a setup file, which `--setup` applies
/// to rebuild it. Every live thread (not exited, not ending) with what can be
/// recreated through the API: its creation options, added common modes, the
/// valid user timers, sources and observers with their creation fields and
/// current modes, the idle tasks and the queue's suspension, and the pending
/// performs. Ids of the server are the aliases (`"id": "t1"`, a source's
/// `"id": "s3"`), so the selector arguments that name threads and sources
/// (which hold server ids) resolve to the recreated ones. Not exported: what
/// the service adds itself (a thread's keep-alive port or timer, which
/// creating the thread recreates; a delayed perform's timer, which the
/// perform recreates), invalid items, and run-time state (fires, counters,
/// logs, messages, signals, performs already run, runs under way).
extension Setup {
    /// The setup document of `registry`'s live threads.
    static func export(_ registry: WorkerRegistry) -> Value {
        let threads = registry.allWorkers.filter { !$0.hasExited && !$0.isEnding }.map(thread)
        return ["version": .number(Double(Self.version)), "threads": .array(threads)]
    }

    private static func thread(_ worker: Worker) -> Value {
        let s = worker.snapshot
        var object: [String: Value] = ["id": .string(s.id)]
        // A default name is the id: left out, so a recreated thread gets its own.
        if s.name != s.id { object["name"] = .string(s.name) }
        object["keepAlive"] = .string(keepAlive(worker, s).rawValue)
        var run: [String: Value] = [
            "style": .string(s.policy.style.rawValue), "mode": .string(s.policy.mode.name),
            "returnAfterSourceHandled": .bool(s.policy.returnAfterSourceHandled),
        ]
        // The distant future is what an absent run.seconds means (no number says it).
        if !s.policy.isDistantFuture { run["seconds"] = .number(s.policy.seconds) }
        object["run"] = .object(run)
        let common = worker.modes().common.filter { $0 != "default" }
        if !common.isEmpty { object["commonModes"] = .array(common.map(Value.string)) }
        // An item removed from every mode is inert (it never fires) and a request cannot create it so: left out.
        object["sources"] = .array(
            worker.sourceSnapshots().filter { $0.role == .user && $0.valid && !$0.modes.isEmpty }.map(source))
        object["timers"] = .array(
            worker.timerSnapshots().filter { $0.role == .user && $0.valid && !$0.modes.isEmpty }.map(timer))
        object["observers"] = .array(worker.observerSnapshots().filter(\.valid).map(observer))
        let queue = worker.taskSnapshot()
        object["tasksSuspended"] = .bool(queue.suspended)
        object["tasks"] = .array(
            queue.tasks.map {
                ["id": .string($0.id), "selector": .string($0.call.selector), "args": .object($0.call.args)]
            })
        object["performs"] = .array(worker.pendingPerforms().map(perform))
        return .object(object)
    }

    /// The keep-alive as it is now: `none` once its port or timer was removed
    /// (creating the thread with it would bring it back).
    private static func keepAlive(_ worker: Worker, _ s: WorkerSnapshot) -> KeepAlive {
        guard let item = s.keepAliveItem else { return s.keepAlive }
        switch s.keepAlive {
        case .port: return (try? worker.sourceSnapshot(item).valid) == true ? .port : .none
        case .timer: return (try? worker.timerSnapshot(item).valid) == true ? .timer : .none
        case .none: return .none
        }
    }

    /// `modes` only when they differ from the creation mode alone.
    private static func modes(_ modes: [String], creation mode: String, into object: inout [String: Value]) {
        if modes != [mode] { object["modes"] = .array(modes.map(Value.string)) }
    }

    private static func action(_ call: SelectorCall?, into object: inout [String: Value]) {
        if let call { object["action"] = ["selector": .string(call.selector), "args": .object(call.args)] }
    }

    private static func source(_ s: SourceSnapshot) -> Value {
        var object: [String: Value] = [
            "id": .string(s.id), "kind": .string(s.kind.rawValue), "mode": .string(s.mode),
            "order": .number(Double(s.order)),
        ]
        modes(s.modes, creation: s.mode, into: &object)
        action(s.action, into: &object)
        return .object(object)
    }

    private static func timer(_ t: TimerSnapshot) -> Value {
        var object: [String: Value] = [
            "interval": .number(t.interval), "repeats": .bool(t.repeats), "delay": .number(t.delay),
            "tolerance": .number(t.tolerance), "mode": .string(t.mode),
        ]
        if let maxFires = t.maxFires { object["maxFires"] = .number(Double(maxFires)) }
        modes(t.modes, creation: t.mode, into: &object)
        action(t.action, into: &object)
        return .object(object)
    }

    private static func observer(_ o: ObserverSnapshot) -> Value {
        var object: [String: Value] = [
            "activities": .array(o.activities.map { .string($0.rawValue) }), "repeats": .bool(o.repeats),
            "mode": .string(o.mode), "order": .number(Double(o.order)),
        ]
        action(o.action, into: &object)
        return .object(object)
    }

    private static func perform(_ p: PerformSnapshot) -> Value {
        var object: [String: Value] = [
            "selector": .string(p.call.selector), "args": .object(p.call.args),
            "modes": .array(p.modes.map(Value.string)),
        ]
        if p.delayed { object["afterDelay"] = .number(p.afterDelay) }
        if p.via != .selector { object["via"] = .string(p.via.rawValue) }
        return .object(object)
    }
}
