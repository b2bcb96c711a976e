import Foundation
import Primitives
import RunLoopCore

/// Performs: queue a selector on a thread, wait for it, list and cancel pending ones. Run on the control loop.
extension API {
    func addPerform(_ r: inout Router) {
        r.add("POST", "/api/threads/{id}/perform") { ctx throws(RunLoopError) in
            let body = try ctx.body(["selector", "args", "waitUntilDone", "modes", "afterDelay", "timeout"])
            let target = try worker(ctx)
            let call = try body.selectorCallHere()
            let wait = try body.bool("waitUntilDone") ?? false
            var modes: [RunLoopMode] = [.common]
            if let list = body.value("modes"), list != .null {
                guard case .array(let items) = list, !items.isEmpty, items.count <= 16 else {
                    throw .badValue("modes", "modes must be a list of 1-16 mode names")
                }
                modes = []
                for item in items {
                    guard let name = item.string else { throw .badValue("modes", "each mode must be a string") }
                    do throws(RunLoopError) {
                        modes.append(try RunLoopMode(name))
                    } catch {
                        throw .badValue("modes", error.message)
                    }
                }
            }
            let afterDelay = try body.number("afterDelay") ?? 0
            // The default is 30 s, capped at --max-wait: an omitted field must never
            // make a valid request fail with "timeout must be <= max-wait".
            let timeout = try body.number("timeout") ?? min(30, limits.maxWaitSeconds)
            try registry.limits.checkSeconds(timeout, field: "timeout")
            guard timeout <= limits.maxWaitSeconds else {
                throw .badValue("timeout", "timeout must be <= \(limits.maxWaitSeconds) (--max-wait)")
            }
            let spec = PerformSpec(call: call, modes: modes, afterDelay: afterDelay)
            guard wait else {
                let performId = try target.perform(spec)
                return .json(
                    202,
                    [
                        "performId": .string(performId), "thread": .string(target.id),
                        "selector": .string(call.selector), "modes": .array(modes.map { .string($0.name) }),
                        "afterDelay": .number(afterDelay),
                    ], headers: [("Location", "/api/threads/\(target.id)/perform")])
            }
            // The caller waits afterDelay + timeout, but never past --max-wait (an
            // afterDelay of hours once held the connection for hours): then 504, and
            // the perform stays pending as documented.
            let callerWait = min(timeout + afterDelay, limits.maxWaitSeconds)
            let deadline = CallerDeadline(seconds: callerWait) { [id = target.id] performId in
                RunLoopError(
                    kind: .deadline, code: "deadline_exceeded",
                    message:
                        "perform \(performId) did not finish within \(callerWait) s; it stays pending and runs when thread \(id)'s loop next runs in one of its modes"
                )
            }
            try target.perform(spec, deadline: deadline) { result in
                if case .failure(let error) = result.outcome, error.kind == .deadline || error.kind == .gone {
                    ctx.fail(error)
                } else {
                    ctx.reply(200, Rep.performResult(result))
                }
            }
            return .deferred
        }
        r.add("GET", "/api/threads/{id}/perform") { ctx throws(RunLoopError) in
            let target = try worker(ctx)
            return .json(200, ["pending": .array(target.pendingPerforms().map(Rep.pending))])
        }
        r.add("DELETE", "/api/threads/{id}/perform") { ctx throws(RunLoopError) in
            let target = try worker(ctx)
            guard let selector = ctx.request.query["selector"], !selector.isEmpty else {
                throw .badValue("selector", "name the selector whose delayed performs to cancel: ?selector=NAME")
            }
            let count = target.cancelDelayedPerforms(selector: selector)
            return .json(200, ["cancelled": .number(Double(count)), "selector": .string(selector)])
        }
    }
}
