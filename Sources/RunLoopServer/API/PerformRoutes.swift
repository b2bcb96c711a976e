import Foundation
import Primitives
import RunLoopCore

/// Performs: queue a selector on a thread, wait for it, list and cancel pending ones. Run on the control loop.
extension API {
    /// The fields of a perform's body (built once: this is the busiest route).
    static let performFields: Set<String> = [
        "selector", "args", "waitUntilDone", "modes", "afterDelay", "timeout", "via",
    ]

    func addPerform(_ r: inout Router) {
        r.add(.post, "/api/threads/{id}/perform") { ctx throws(RunLoopError) in try perform(ctx) }
        r.add(.get, "/api/threads/{id}/performs/{pid}") { ctx throws(RunLoopError) in
            let target = try worker(ctx)
            return .json(200, Rep.performStatus(try target.performStatus(ctx.param("pid")), thread: target.id))
        }
        r.add(.get, "/api/threads/{id}/perform") { ctx throws(RunLoopError) in
            let target = try worker(ctx)
            return .json(200, ["pending": .array(target.pendingPerforms().map(Rep.pending))])
        }
        r.add(.delete, "/api/threads/{id}/perform") { ctx throws(RunLoopError) in
            let target = try worker(ctx)
            guard let selector = ctx.request.query["selector"], !selector.isEmpty else {
                throw .badValue("selector", "name the selector whose delayed performs to cancel: ?selector=NAME")
            }
            var args: [String: Value]?
            if let text = ctx.request.query["args"] {
                // Bounded by the request line libmicrohttpd accepts (its connection memory).
                guard case .object(let object)? = try? JSONReader.parse(Array(text.utf8)) else {
                    throw .badValue("args", "args must be a JSON object (URL-encoded)")
                }
                args = object
            }
            let ids = target.cancelDelayedPerforms(selector: selector, args: args)
            return .json(
                200,
                [
                    "cancelled": .number(Double(ids.count)), "ids": .array(ids.map(Value.string)),
                    "selector": .string(selector), "args": args.map(Value.object) ?? .null,
                ])
        }
    }

    /// `POST /api/threads/{id}/perform`: queues the selector; with
    /// `waitUntilDone` the answer waits for its result.
    func perform(_ ctx: RouteContext) throws(RunLoopError) -> Reply {
        let body = try ctx.body(Self.performFields)
        let target = try worker(ctx)
        let call = try body.selectorCallHere()
        let wait = try body.bool("waitUntilDone") ?? false
        let modes = try Self.performModes(body)
        let afterDelay = try body.number("afterDelay")
        let via = try Self.performVia(body)
        if via == .block && afterDelay != nil {
            throw .badValue(
                "afterDelay",
                "a block perform has no delay (CFRunLoopPerformBlock): drop afterDelay or use via selector")
        }
        // The default is 30 s, capped at --max-wait: an omitted field must never
        // make a valid request fail with "timeout must be <= max-wait".
        let timeout = try body.number("timeout") ?? min(30, limits.maxWaitSeconds)
        try registry.limits.checkSeconds(timeout, field: "timeout")
        guard timeout <= limits.maxWaitSeconds else {
            throw .badValue("timeout", "timeout must be <= \(limits.maxWaitSeconds) (--max-wait)")
        }
        let spec = PerformSpec(call: call, modes: modes, afterDelay: afterDelay, via: via)
        // A nested run the thread's budgets would refuse is refused now (429),
        // not queued; one that passes here is checked again when it starts.
        if call.selector == "runNested" { try target.checkNestingAdmission() }
        guard wait else {
            let performId = try target.perform(spec)
            return .json(
                202,
                Rep.performAccepted(
                    performId, thread: target.id, selector: call.selector,
                    state: afterDelay == nil ? .pending : .delayed,
                    extra: [
                        "modes": .array(spec.modes.map { .string($0.name) }),
                        "afterDelay": afterDelay.map(Value.number) ?? .null, "via": .string(via.rawValue),
                    ]), headers: [("Location", Rep.performPath(thread: target.id, performId))])
        }
        try performAndWait(spec, on: target, timeout: timeout, ctx)
        return .deferred
    }

    /// The `via` field: how the perform reaches the loop (default `selector`).
    static func performVia(_ body: Body) throws(RunLoopError) -> PerformVia {
        guard let text = try body.string("via", maxLength: 32) else { return .selector }
        guard let via = PerformVia(rawValue: text) else {
            throw .badValue(
                "via",
                "via must be one of \(PerformVia.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")) (got \"\(text)\")"
            )
        }
        return via
    }

    /// The `modes` field: nil for Cocoa's default of the path (afterDelay:
    /// default; onThread: common).
    static func performModes(_ body: Body) throws(RunLoopError) -> [RunLoopMode]? {
        guard let list = body.value("modes"), list != .null else { return nil }
        guard case .array(let items) = list, !items.isEmpty, items.count <= 16 else {
            throw .badValue("modes", "modes must be a list of 1-16 mode names")
        }
        var names: [RunLoopMode] = []
        for item in items {
            guard let name = item.string else { throw .badValue("modes", "each mode must be a string") }
            do throws(RunLoopError) {
                names.append(try RunLoopMode(name))
            } catch {
                throw .badValue("modes", error.message)
            }
        }
        return names
    }

    /// `waitUntilDone`: the answer is the perform's result. The caller waits
    /// `timeout` (counted from the request, an `afterDelay` included, as
    /// docs/api.md says), never past --max-wait. A wait that passes is not a
    /// failure: the perform was accepted and stays queued (or delayed), so
    /// the answer is 202 with where to follow it.
    private func performAndWait(
        _ spec: PerformSpec, on target: Worker, timeout: Double, _ ctx: RouteContext
    ) throws(RunLoopError) {
        let callerWait = min(timeout, limits.maxWaitSeconds)
        let delayed = spec.afterDelay != nil
        let deadline = CallerDeadline(seconds: callerWait) { [id = target.id] performId in
            RunLoopError(
                kind: .deadline, code: .waitPassed,
                message: delayed
                    ? "perform \(performId) did not finish within the \(callerWait) s wait; it stays delayed and runs once its afterDelay has passed and thread \(id)'s loop runs in one of its modes"
                    : "perform \(performId) did not finish within the \(callerWait) s wait; it stays queued and runs when thread \(id)'s loop next runs in one of its modes"
            )
        }
        try target.perform(spec, deadline: deadline) { result in
            Self.answerPerform(result, selector: spec.call.selector, on: target, ctx)
        }
    }

    /// A waited perform's answer: 200 with its result, its error, or 202 when
    /// the caller's wait passed first.
    private static func answerPerform(_ result: PerformResult, selector: String, on target: Worker, _ ctx: RouteContext)
    {
        guard case .failure(let error) = result.outcome, error.kind == .deadline || error.kind == .gone else {
            // The same text the history's row was made from (`PerformJSON`).
            ctx.reply(200, json: PerformJSON.answer(result))
            return
        }
        guard error.kind == .deadline else {
            ctx.fail(error)
            return
        }
        let state = (try? target.performStatus(result.performId).state) ?? .pending
        ctx.reply(
            202,
            Rep.performAccepted(
                result.performId, thread: target.id, selector: selector, state: state,
                extra: ["message": .string(error.message)]),
            headers: [("Location", Rep.performPath(thread: target.id, result.performId))])
    }
}
