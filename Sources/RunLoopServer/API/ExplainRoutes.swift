import Foundation
import RunLoopCore

/// The explainer: turns, what keeps a loop alive, warnings. Run on the control loop.
extension API {
    func addExplain(_ r: inout Router) {
        r.add("GET", "/api/threads/{id}/turns") { ctx throws(RunLoopError) in
            let target = try worker(ctx)
            let since = try Self.queryInteger(ctx, "since", min: 0, max: 9_007_199_254_740_991) ?? 0
            // Past the ring's size a limit asks for nothing more than the whole ring.
            let capacity = registry.diagnostics.options.turnRingSize
            let asked = try Self.queryInteger(ctx, "limit", min: 1, max: 1_000_000) ?? 100
            let limit = min(asked, capacity)
            let (turns, last, size) = target.turns(since: since, limit: limit)
            return .json(
                200,
                [
                    "thread": .string(target.id), "turns": .array(turns.map(Rep.turn)),
                    "last": .number(Double(last)), "capacity": .number(Double(size)),
                ])
        }
        r.add("GET", "/api/threads/{id}/why") { ctx throws(RunLoopError) in
            .json(200, Rep.why(try worker(ctx).why()))
        }
        r.add("GET", "/api/warnings") { ctx throws(RunLoopError) in
            let query = ctx.request.query
            let thread = query["thread"].flatMap { $0.isEmpty ? nil : $0 }
            let code = query["code"]
            if let code, !WarningTable.codes.contains(code) {
                throw .badValue("code", "code must be one of \(WarningTable.codes.joined(separator: ", "))")
            }
            var active: Bool?
            if let text = query["active"] {
                guard text == "true" || text == "false" else {
                    throw .badValue("active", "active must be true or false")
                }
                active = text == "true"
            }
            let list = registry.diagnostics.warnings.list(thread: thread, code: code, active: active)
            return .json(200, ["warnings": .array(list.map(Rep.warning))])
        }
    }

    /// A boolean query parameter (`true` or `false`), or nil when absent.
    static func queryBool(_ ctx: RouteContext, _ name: String) throws(RunLoopError) -> Bool? {
        guard let text = ctx.request.query[name] else { return nil }
        guard text == "true" || text == "false" else { throw .badValue(name, "\(name) must be true or false") }
        return text == "true"
    }

    /// An integer query parameter within `min...max`, or nil when absent
    /// (present but empty is not a number: 400).
    static func queryInteger(_ ctx: RouteContext, _ name: String, min: Int, max: Int) throws(RunLoopError) -> Int? {
        guard let text = ctx.request.query[name] else { return nil }
        guard let value = Int(text), value >= min, value <= max else {
            throw .badValue(name, "\(name) must be an integer in \(min)...\(max)")
        }
        return value
    }
}
