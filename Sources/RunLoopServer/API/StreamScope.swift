import RunLoopCore

/// What a `scope=summary` event stream (`GET /api/events?scope=summary&inspect=…&types=…`)
/// carries besides its coalesced `snapshot` events: the events of the
/// inspected threads (of the listed types only, when `types` is given) and
/// every thread's `warning` events.
struct StreamScope: Sendable, Hashable {
    /// The threads whose events flow (`inspect`).
    var inspect: Set<String>
    /// The event types that flow for them (`types`); nil: every type.
    var types: Set<String>?

    /// Every event name a stream may carry (`types` takes only these).
    static let eventTypes = [
        "thread", "run-exit", "timer", "perform", "source", "timer-mode", "source-mode", "task", "activity", "turn",
        "warning", "stall", "stall-ended",
    ]

    /// The scope a request asks for: nil without `scope` (the whole stream, as
    /// before); `inspect` and `types` need `scope=summary`.
    init?(_ query: [String: String], limits: APILimits) throws(RunLoopError) {
        guard let scope = query["scope"] else {
            for name in ["inspect", "types"] where query[name] != nil {
                throw .badValue(name, "\(name) needs scope=summary (without a scope the stream carries every event)")
            }
            return nil
        }
        guard scope == "summary" else { throw .badValue("scope", "scope must be summary") }
        inspect = []
        if let text = query["inspect"], !text.isEmpty {
            let ids = text.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            guard ids.count <= limits.streamMaxInspect else {
                throw .badValue(
                    "inspect",
                    "inspect lists at most \(limits.streamMaxInspect) threads (the server's bound, --stream-max-inspect)"
                )
            }
            for id in ids where WorkerRegistry.number(id) == nil {
                throw .badValue("inspect", "inspect is a comma-separated list of thread ids (t3,t17); got \"\(id)\"")
            }
            inspect = Set(ids)
        }
        if let text = query["types"] {
            let names = text.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            for name in names where !Self.eventTypes.contains(name) {
                throw .badValue(
                    "types", "unknown event type \"\(name)\"; types: \(Self.eventTypes.joined(separator: ", "))")
            }
            types = Set(names)
        }
    }

    /// Whether an event `name` about `thread` flows on this stream: every
    /// warning does; other events only for an inspected thread and a listed type.
    func wants(_ name: String, thread: String) -> Bool {
        if name == "warning" { return true }
        return inspect.contains(thread) && (types?.contains(name) ?? true)
    }
}
