import Foundation
import Primitives
import RunLoopCore

/// Threads: create, list, read, end, run, stop, wake up, log. Run on the control loop.
extension API {
    /// `limit` (1...`--max-thread-page`, nil: every thread) and `cursor` (the
    /// `nextCursor` of the page before: the id of its last thread) of `GET /api/threads`.
    func threadPage(_ ctx: RouteContext) throws(RunLoopError) -> (limit: Int?, cursor: String?) {
        var limit: Int?
        if let text = ctx.request.query["limit"] {
            guard text.utf8.count <= 9, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let value = Int(text),
                (1...limits.maxThreadPage).contains(value)
            else {
                throw .badValue(
                    "limit",
                    "limit must be a whole number 1...\(limits.maxThreadPage) (the server's bound, --max-thread-page)")
            }
            limit = value
        }
        var cursor: String?
        if let text = ctx.request.query["cursor"] {
            guard text.utf8.count <= 19, WorkerRegistry.number(text) != nil else {
                throw .badValue("cursor", "cursor must be the nextCursor of an earlier page (a thread id such as t17)")
            }
            cursor = text
        }
        return (limit, cursor)
    }

    func addThreads(_ r: inout Router) {
        r.add(.post, "/api/threads") { ctx throws(RunLoopError) in
            let body = try ctx.body(["name", "keepAlive", "run", "turnRingSize"])
            var options = WorkerOptions()
            options.name = try body.string("name", maxLength: registry.limits.maxNameLength)
            if let text = try body.string("keepAlive") {
                guard let keepAlive = KeepAlive(rawValue: text) else {
                    throw .badValue("keepAlive", "keepAlive must be one of port, timer, none")
                }
                options.keepAlive = keepAlive
            }
            let maxRing = registry.diagnostics.options.maxTurnRingSize
            options.turnRingSize = try body.integer("turnRingSize", min: 1, max: maxRing)
            if let run = try body.object("run") {
                let policy = try Body(
                    object: run, prefix: "run.", allowed: ["style", "mode", "seconds", "returnAfterSourceHandled"])
                if let text = try policy.string("style") {
                    guard let style = RunStyle(rawValue: text) else {
                        throw .badValue(
                            "run.style",
                            "run.style must be one of \(RunStyle.allCases.map(\.rawValue).joined(separator: ", "))")
                    }
                    options.policy.style = style
                }
                if let mode = try policy.mode("mode") { options.policy.mode = mode }
                if let seconds = try policy.number("seconds") {
                    // Given, it is a real bound; omitted, the distant future.
                    try registry.limits.checkSeconds(seconds, field: "run.seconds")
                    options.policy.seconds = seconds
                }
                if let flag = try policy.bool("returnAfterSourceHandled") {
                    options.policy.returnAfterSourceHandled = flag
                }
            }
            let created = try registry.createWorker(options)
            return .json(
                201, API.hinting(Rep.thread(created.snapshot), options.policy.mode),
                headers: [("Location", "/api/threads/\(created.id)")])
        }
        r.add(.get, "/api/threads") { ctx throws(RunLoopError) in
            let (limit, cursor) = try threadPage(ctx)
            let page = registry.page(after: cursor, limit: limit ?? .max)
            let next = page.more ? page.workers.last.map { Value.string($0.id) } ?? .null : .null
            return .json(
                200,
                [
                    "threads": .array(page.workers.map { Rep.explainedThread($0) }), "nextCursor": next,
                    "total": .number(Double(page.total)),
                ])
        }
        r.add(.get, "/api/threads/{id}") { ctx throws(RunLoopError) in
            .json(200, Rep.explainedThread(try worker(ctx)))
        }
        r.add(.delete, "/api/threads/{id}") { ctx throws(RunLoopError) in
            let target = try worker(ctx)
            let once = ReplyOnce(ctx.respond)
            once.expire(after: limits.endWaitSeconds) {
                "thread \(target.id) was told to end but has not returned within \(limits.endWaitSeconds) s: "
                    + (target.busyDescription() ?? "a handler is still running")
                    + "; it ends when that handler returns"
            }
            target.end { final in once.answer(APIResponses.json(200, Rep.thread(final))) }
            return .deferred
        }
        r.add(.post, "/api/threads/{id}/run") { ctx throws(RunLoopError) in
            let body = try ctx.body(["mode", "seconds", "returnAfterSourceHandled"])
            let target = try worker(ctx)
            let mode = try body.mode("mode") ?? target.policy.mode
            guard let seconds = try body.number("seconds") else {
                throw .badValue("seconds", "seconds is required (how long this run may last)")
            }
            guard seconds <= limits.maxWaitSeconds else {
                throw .badValue(
                    "seconds", "seconds must be <= \(limits.maxWaitSeconds) (the server's longest wait, --max-wait)")
            }
            let flag = try body.bool("returnAfterSourceHandled") ?? false
            let once = ReplyOnce(ctx.respond)
            try target.run(mode: mode, seconds: seconds, returnAfterSourceHandled: flag) { once.answer(exit: $0) }
            // A run lasts `seconds` plus whatever its handlers take: bound the wait.
            once.expire(after: seconds + limits.stopWaitSeconds) {
                "the run has not returned \(limits.stopWaitSeconds) s after its timeout: "
                    + (target.busyDescription() ?? "a handler is busy")
            }
            return .deferred
        }
        r.add(.post, "/api/threads/{id}/stop") { ctx throws(RunLoopError) in
            let body = try ctx.body(["atEntry"])
            let atEntry = try body.bool("atEntry") ?? false
            let target = try worker(ctx)
            let once = ReplyOnce(ctx.respond)
            let by = "POST /api/threads/\(target.id)/stop"
            let origin = StopOrigin.request(by: by, requestId: RunLoopService.requestId(for: ctx.request))
            target.stop(origin: origin, atEntry: atEntry) {
                once.answer(exit: $0)
            }
            once.expire(after: limits.stopWaitSeconds) {
                "CFRunLoopStop was called but the run has not returned within \(limits.stopWaitSeconds) s: "
                    + (target.busyDescription() ?? "a handler is busy") + "; it stops when the handler returns"
            }
            return .deferred
        }
        r.add(.post, "/api/threads/{id}/wakeup") { ctx throws(RunLoopError) in
            _ = try ctx.body([])
            let target = try worker(ctx)
            try target.wakeUp()
            return .json(
                200, ["thread": .string(target.id), "woken": true, "state": .string(target.snapshot.state.rawValue)])
        }
        r.add(.get, "/api/threads/{id}/log") { ctx throws(RunLoopError) in
            let target = try worker(ctx)
            let counters = target.counterValues.mapValues { Value.number(Double($0)) }
            return .json(200, ["lines": .array(target.log.map(Value.string)), "counters": .object(counters)])
        }
    }
}
