import Foundation
import Primitives
import RunLoopCore

/// The explainer: turns, what keeps a loop alive, warnings. Run on the control
/// loop; `/why` plays its runs on the predictions queue (`API.offload`).
extension API {
    func addExplain(_ r: inout Router) {
        r.add(.get, "/api/threads/{id}/turns") { ctx throws(RunLoopError) in
            let target = try worker(ctx)
            let since = try API.integerParameter(ctx, "since", in: 0...API.maxExactInteger) ?? 0
            // Past the largest ring a limit asks for nothing more than a whole ring.
            let asked = try API.integerParameter(ctx, "limit", in: 1...1_000_000) ?? 100
            let limit = min(asked, registry.diagnostics.options.maxTurnRingSize)
            let page = target.turns(matching: try Self.turnFilter(ctx), since: since, limit: limit)
            var answer: [String: Value] = [
                "thread": .string(target.id), "turns": .array(page.turns.map(Rep.turn)),
                "last": .number(Double(page.last)), "capacity": .number(Double(page.capacity)),
                "dropped": .number(Double(page.dropped)),
            ]
            // Where its last runs returned (an ended thread's timeline lane): asked for, whatever the filters.
            if try Self.queryBool(ctx, "exits") == true {
                answer["exits"] = .array(target.recentExits().map { Rep.exit($0) })
            }
            return .json(200, .object(answer))
        }
        r.add(.get, "/api/threads/{id}/why") { ctx throws(RunLoopError) in
            let target = try worker(ctx)
            // It plays the loop's next run: on the predictions queue, as /predict.
            return offload(ctx, on: predictions) { Rep.why(target.why()) }
        }
        r.add(.get, "/api/warnings") { ctx throws(RunLoopError) in
            let query = ctx.request.query
            let thread = query["thread"].flatMap { $0.isEmpty ? nil : $0 }
            var code: WarningCode?
            if let text = query["code"] {
                guard let known = WarningCode(rawValue: text) else {
                    let all = WarningCode.allCases.map(\.rawValue).joined(separator: ", ")
                    throw .badValue("code", "code must be one of \(all)")
                }
                code = known
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

    /// The `/turns` filters: `wokeBy` (a wake kind), `callout` (a callout
    /// kind), `calloutId`, `run`, `from` and `to` (ISO 8601 timestamps, as
    /// turns show them).
    static func turnFilter(_ ctx: RouteContext) throws(RunLoopError) -> TurnFilter {
        let query = ctx.request.query
        var filter = TurnFilter()
        if let text = query["wokeBy"] {
            guard let kind = WakeKind(rawValue: text) else {
                throw .badValue(
                    "wokeBy", "wokeBy must be one of \(WakeKind.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            filter.wokeBy = kind
        }
        if let text = query["callout"] {
            guard let kind = CalloutKind(rawValue: text) else {
                throw .badValue(
                    "callout",
                    "callout must be one of \(CalloutKind.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            filter.calloutKind = kind
        }
        if let text = query["calloutId"] {
            guard !text.isEmpty, text.utf8.count <= 128 else {
                throw .badValue("calloutId", "calloutId must be 1-128 bytes (an id such as tm1, s2, p7)")
            }
            filter.calloutId = text
        }
        filter.run = try API.integerParameter(ctx, "run", in: 1...API.maxExactInteger)
        filter.from = try queryDate(ctx, "from")
        // A window whose `to` is before its `from` is empty, not an error: it selects no turn.
        filter.to = try queryDate(ctx, "to")
        return filter
    }

    /// An ISO 8601 timestamp query parameter (`2026-11-25T13:12:49.806Z`,
    /// fractional seconds optional), or nil when absent.
    static func queryDate(_ ctx: RouteContext, _ name: String) throws(RunLoopError) -> Date? {
        guard let text = ctx.request.query[name] else { return nil }
        guard text.utf8.count <= 64, let date = Timestamp.parse(text) else {
            throw .badValue(name, "\(name) must be an ISO 8601 timestamp such as 2026-11-25T13:12:49.806Z")
        }
        return date
    }

    /// A boolean query parameter (`true` or `false`), or nil when absent.
    static func queryBool(_ ctx: RouteContext, _ name: String) throws(RunLoopError) -> Bool? {
        guard let text = ctx.request.query[name] else { return nil }
        guard text == "true" || text == "false" else { throw .badValue(name, "\(name) must be true or false") }
        return text == "true"
    }
}
