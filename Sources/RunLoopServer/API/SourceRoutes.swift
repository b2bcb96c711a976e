import Foundation
import Primitives
import RunLoopCore

/// Sources: add custom and port sources, signal, send messages, invalidate. Run on the control loop.
extension API {
    func addSources(_ r: inout Router) {
        r.add(.post, "/api/threads/{id}/sources") { ctx throws(RunLoopError) in
            let body = try ctx.body(["kind", "mode", "order", "action"])
            let target = try worker(ctx)
            guard let text = try body.string("kind"), let kind = SourceKind(rawValue: text) else {
                throw .badValue("kind", "kind is required: custom or port")
            }
            let spec = SourceSpec(
                kind: kind, mode: try body.mode("mode") ?? .default,
                order: try body.integer("order", min: -1_000_000, max: 1_000_000) ?? 0,
                action: try body.selectorCall("action"))
            let source = try target.addSource(spec)
            return .json(
                201, API.hinting(Rep.source(source), spec.mode),
                headers: [("Location", "/api/threads/\(target.id)/sources/\(source.id)")])
        }
        r.add(.get, "/api/threads/{id}/sources") { ctx throws(RunLoopError) in
            .json(200, ["sources": .array(try worker(ctx).sourceSnapshots().map(Rep.source))])
        }
        r.add(.get, "/api/threads/{id}/sources/{sid}") { ctx throws(RunLoopError) in
            .json(200, Rep.source(try worker(ctx).sourceSnapshot(try owned(ctx, "source", "sid"))))
        }
        r.add(.delete, "/api/threads/{id}/sources/{sid}") { ctx throws(RunLoopError) in
            let wake = try Self.queryBool(ctx, "wakeup") ?? false
            return .json(
                200, Rep.source(try worker(ctx).invalidateSource(try owned(ctx, "source", "sid"), wakeUp: wake)))
        }
        r.add(.post, "/api/threads/{id}/sources/{sid}/modes") { ctx throws(RunLoopError) in
            let body = try ctx.body(["mode"])
            guard let mode = try body.mode("mode") else { throw .badValue("mode", "mode is required") }
            let source = try worker(ctx).addSourceMode(try owned(ctx, "source", "sid"), mode: mode)
            return .json(200, API.hinting(Rep.source(source), mode))
        }
        r.add(.delete, "/api/threads/{id}/sources/{sid}/modes/{mode}") { ctx throws(RunLoopError) in
            let target = try worker(ctx)
            let mode = try API.pathMode(ctx)
            let wake = try Self.queryBool(ctx, "wakeup") ?? false
            return .json(
                200, Rep.source(try target.removeSourceMode(try owned(ctx, "source", "sid"), mode: mode, wakeUp: wake)))
        }
        r.add(.post, "/api/threads/{id}/sources/{sid}/signal") { ctx throws(RunLoopError) in
            let body = try ctx.body(["wakeup"])
            let target = try worker(ctx)
            let wake = try body.bool("wakeup") ?? true
            let source = try target.signalSource(try owned(ctx, "source", "sid"), wakeUp: wake)
            var object = Rep.source(source).object ?? [:]
            object["wakeup"] = .bool(wake)
            return .json(200, .object(object))
        }
        r.add(.post, "/api/threads/{id}/sources/{sid}/messages") { ctx throws(RunLoopError) in
            let body = try ctx.body(["msgid", "data"])
            let target = try worker(ctx)
            let msgid = try body.integer("msgid", min: 0, max: 2_147_483_647) ?? 0
            let data = try body.string("data", maxLength: registry.limits.maxMessageBytes) ?? ""
            let source = try target.sendMessage(toSource: try owned(ctx, "source", "sid"), msgid: msgid, data: data)
            return .json(202, Rep.source(source))
        }
    }

    /// The item id in path parameter `param`, checked against the thread in
    /// the path: an id that belongs to another thread answers 404 naming that
    /// thread ("source s5 belongs to thread t2"), not a bare "no source s5".
    func owned(_ ctx: RouteContext, _ kind: String, _ param: String) throws(RunLoopError) -> String {
        let itemId = try ctx.param(param)
        let thread = try ctx.param("id")
        if let target = try? registry.worker(thread), target.holds(kind, itemId) { return itemId }
        guard let owner = registry.owner(of: kind, itemId), owner != thread else { return itemId }
        throw RunLoopError(
            kind: .notFound, code: .notFound,
            message:
                "\(kind) \(itemId) belongs to thread \(owner), not \(thread): use /api/threads/\(owner)/\(kind)s/\(itemId)",
            field: param)
    }

    /// `object` with `modeHint` ("… did you mean default?") when `mode` is a
    /// custom mode named close to a known one.
    static func hinting(_ object: Value, _ mode: RunLoopMode?) -> Value {
        guard let hint = mode?.hint, case .object(var members) = object else { return object }
        members["modeHint"] = .string(hint)
        return .object(members)
    }
}
