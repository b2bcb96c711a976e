import RunLoopCore

/// Each engine event as the stream names and sends it: the SSE event name,
/// its thread and its JSON payload (a mapping, no state).
extension EventHub {
    /// The SSE event name and its thread, without building the payload.
    static func name(of event: RunLoopEvent) -> (String, String) {
        switch event {
        case .thread(let snapshot, _): ("thread", snapshot.id)
        case .runExit(let thread, _): ("run-exit", thread)
        case .timer(let thread, _, _, _, _): ("timer", thread)
        case .perform(let thread, _): ("perform", thread)
        case .source(let thread, _, _, _, _): ("source", thread)
        case .itemMode(let thread, let kind, _, _, _): ("\(kind)-mode", thread)
        case .task(let thread, _, _, _): ("task", thread)
        case .activity(let thread, _): ("activity", thread)
        case .turn(let thread, _): ("turn", thread)
        case .warning(let warning): ("warning", warning.thread)
        case .stall(let stall, _): ("stall", stall.thread)
        case .stallEnded(let stall): ("stall-ended", stall.thread)
        }
    }

    /// The SSE event name, its thread and its JSON payload.
    static func describe(_ event: RunLoopEvent) -> (String, String, Value) {
        switch event {
        case .thread(let snapshot, let change):
            var object = Rep.thread(snapshot).object ?? [:]
            object["change"] = .string(change.rawValue)
            return (
                "thread", snapshot.id,
                ["thread": .string(snapshot.id), "change": .string(change.rawValue), "snapshot": .object(object)]
            )
        case .runExit(let thread, let exit):
            var object = Rep.exit(exit).object ?? [:]
            object["thread"] = .string(thread)
            return ("run-exit", thread, .object(object))
        case .timer(let thread, let timer, let fires, let latenessMs, let valid):
            return (
                "timer", thread,
                [
                    "thread": .string(thread), "timer": .string(timer), "fires": .number(Double(fires)),
                    "latenessMs": Rep.round3(latenessMs), "valid": .bool(valid),
                ]
            )
        case .perform(let thread, let result):
            return ("perform", thread, Rep.performResult(result))
        case .source(let thread, let source, let kind, let fired, let messages):
            return (
                "source", thread,
                [
                    "thread": .string(thread), "source": .string(source), "kind": .string(kind.rawValue),
                    "fired": .number(Double(fired)), "messages": .number(Double(messages)),
                ]
            )
        case .itemMode(let thread, let kind, let item, let mode, let change):
            return (
                "\(kind)-mode", thread,
                [
                    "thread": .string(thread), kind: .string(item), "mode": .string(mode), "change": .string(change),
                ]
            )
        case .task(let thread, let task, let change, let runs):
            return (
                "task", thread,
                [
                    "thread": .string(thread), "task": .string(task), "change": .string(change.rawValue),
                    "runs": .number(Double(runs)),
                ]
            )
        case .activity(let thread, let record):
            var object = Rep.activity(record).object ?? [:]
            object["thread"] = .string(thread)
            return ("activity", thread, .object(object))
        case .turn(let thread, let turn):
            var object = Rep.turn(turn).object ?? [:]
            object["thread"] = .string(thread)
            return ("turn", thread, .object(object))
        case .warning(let warning):
            return ("warning", warning.thread, Rep.warning(warning))
        case .stall(let stall, let change):
            return ("stall", stall.thread, Rep.stall(stall, change: change.rawValue))
        case .stallEnded(let stall):
            return ("stall-ended", stall.thread, Rep.stall(stall, change: nil))
        }
    }
}
