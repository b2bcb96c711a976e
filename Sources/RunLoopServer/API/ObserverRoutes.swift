import Foundation
import Primitives
import RunLoopCore

/// Modes, observers and the activities they record. Run on the control loop.
extension API {
    func addModesAndObservers(_ r: inout Router) {
        r.add(.get, "/api/threads/{id}/modes") { ctx throws(RunLoopError) in
            .json(200, Rep.modes(try worker(ctx).modes()))
        }
        r.add(.post, "/api/threads/{id}/modes/common") { ctx throws(RunLoopError) in
            let body = try ctx.body(["mode"])
            guard let mode = try body.mode("mode") else { throw .badValue("mode", "mode is required") }
            return .json(200, Rep.modes(try worker(ctx).addCommonMode(mode)))
        }
        r.add(.post, "/api/threads/{id}/observers") { ctx throws(RunLoopError) in
            let body = try ctx.body(["activities", "repeats", "mode", "order", "action"])
            let target = try worker(ctx)
            var activities = Activity.allCases
            switch body.value("activities") {
            case nil, .null?, .string("all")?:
                break
            case .array(let items)?:
                activities = []
                for item in items {
                    guard let name = item.string, let activity = Activity(rawValue: name) else {
                        throw .badValue(
                            "activities",
                            "activities are: \(Activity.allCases.map(\.rawValue).joined(separator: ", ")) (or \"all\")")
                    }
                    if !activities.contains(activity) { activities.append(activity) }
                }
            default:
                throw .badValue("activities", "activities must be a list of activity names or \"all\"")
            }
            let spec = ObserverSpec(
                activities: activities, repeats: try body.bool("repeats") ?? true,
                mode: try body.mode("mode") ?? .common,
                order: try body.integer("order", min: -1_000_000, max: 1_000_000) ?? 0,
                action: try body.selectorCall("action"))
            return .json(201, Rep.observer(try target.addObserver(spec)))
        }
        r.add(.delete, "/api/threads/{id}/observers/{oid}") { ctx throws(RunLoopError) in
            .json(200, Rep.observer(try worker(ctx).invalidateObserver(ctx.param("oid"))))
        }
        r.add(.get, "/api/threads/{id}/observers") { ctx throws(RunLoopError) in
            .json(200, ["observers": .array(try worker(ctx).observerSnapshots().map(Rep.observer))])
        }
        r.add(.get, "/api/threads/{id}/activity") { ctx throws(RunLoopError) in
            let target = try worker(ctx)
            let since = try API.sinceParameter(ctx, what: "a seq") ?? 0
            let records = target.activities(since: since)
            return .json(
                200,
                [
                    "activity": .array(records.map(Rep.activity)),
                    "lastSeq": .number(Double(records.last?.seq ?? since)),
                ])
        }
    }
}
