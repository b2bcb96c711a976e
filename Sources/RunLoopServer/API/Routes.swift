import Foundation
import RunLoopCore

/// Bounds of the HTTP control plane (beyond the engine's `Limits`).
public struct APILimits: Sendable, Hashable {
    /// Longest wait a request may ask for (`timeout` of a perform, a manual
    /// run's `seconds`), in seconds.
    public var maxWaitSeconds: Double = 300
    /// How long `stop` waits for the run it stopped to return before 504.
    public var stopWaitSeconds: Double = 10
    /// How long `DELETE /api/threads/{id}` waits for the thread to be joined.
    public var endWaitSeconds: Double = 15
    /// Event-stream clients at once.
    public var maxEventClients = 32
    /// Shortest interval of a repeating timer, in seconds. CF halts the
    /// process when a repeating timer's interval rounds to 0 ns, and a
    /// shorter one would only spin the loop.
    public var minTimerInterval: Double = 0.0001

    /// The defaults.
    public init() {}
}

/// The `/api` endpoints (`openapi.json` is their contract, `docs/api.md` the
/// guide), run on the control loop's thread.
struct API: Sendable {
    let registry: WorkerRegistry
    let events: EventHub
    let limits: APILimits
    let version: Value
    /// The OpenAPI document (built once: it depends only on the configuration).
    let openAPI: Value

    func makeRouter() -> Router {
        var r = Router()
        r.add("GET", "/api/version") { _ throws(RunLoopError) in .json(200, version) }
        // Serialized once: every request gets the same bytes.
        let openAPIResponse = APIResponses.json(200, openAPI)
        r.add("GET", "/api/openapi.json") { _ throws(RunLoopError) in .response(openAPIResponse) }
        r.add("GET", "/api/selectors") { _ throws(RunLoopError) in
            .json(200, ["selectors": .array(registry.selectors.all.map(Rep.selector))])
        }
        r.add("GET", "/api/events") { ctx throws(RunLoopError) in try events.open(ctx) }
        addThreads(&r)
        addPerform(&r)
        addTimers(&r)
        addSources(&r)
        addModesAndObservers(&r)
        addTasks(&r)
        return r
    }

    private func worker(_ ctx: RouteContext) throws(RunLoopError) -> Worker {
        try registry.worker(ctx.param("id"))
    }

    // MARK: threads

    private func addThreads(_ r: inout Router) {
        r.add("POST", "/api/threads") { ctx throws(RunLoopError) in
            let body = try ctx.body(["name", "keepAlive", "run"])
            var options = WorkerOptions()
            options.name = try body.string("name", maxLength: registry.limits.maxNameLength)
            if let text = try body.string("keepAlive") {
                guard let keepAlive = KeepAlive(rawValue: text) else {
                    throw .badValue("keepAlive", "keepAlive must be one of port, timer, none")
                }
                options.keepAlive = keepAlive
            }
            if let run = try body.object("run") {
                let policy = try Body(
                    object: run, prefix: "run.", allowed: ["style", "mode", "seconds", "returnAfterSourceHandled"])
                if let text = try policy.string("style") {
                    guard let style = RunStyle(rawValue: text) else {
                        throw .badValue("run.style", "run.style must be one of loop, forever, manual")
                    }
                    options.policy.style = style
                }
                if let mode = try policy.mode("mode") { options.policy.mode = mode }
                if let seconds = try policy.number("seconds") { options.policy.seconds = seconds }
                if let flag = try policy.bool("returnAfterSourceHandled") {
                    options.policy.returnAfterSourceHandled = flag
                }
            }
            let created = try registry.createWorker(options)
            return .json(201, Rep.thread(created.snapshot), headers: [("Location", "/api/threads/\(created.id)")])
        }
        r.add("GET", "/api/threads") { _ throws(RunLoopError) in
            .json(200, ["threads": .array(registry.allWorkers.map { Rep.thread($0.snapshot) })])
        }
        r.add("GET", "/api/threads/{id}") { ctx throws(RunLoopError) in
            .json(200, Rep.thread(try worker(ctx).snapshot))
        }
        r.add("DELETE", "/api/threads/{id}") { ctx throws(RunLoopError) in
            let target = try worker(ctx)
            let once = Once(ctx.respond)
            once.expire(after: limits.endWaitSeconds) {
                "thread \(target.id) was told to end but has not returned within \(limits.endWaitSeconds) s (a handler is still running); it ends when that handler returns"
            }
            target.end { final in once.fire(APIResponses.json(200, Rep.thread(final))) }
            return .deferred
        }
        r.add("POST", "/api/threads/{id}/run") { ctx throws(RunLoopError) in
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
            let once = Once(ctx.respond)
            try target.run(mode: mode, seconds: seconds, returnAfterSourceHandled: flag) { once.fire(exit: $0) }
            // A run lasts `seconds` plus whatever its handlers take: bound the wait.
            once.expire(after: seconds + limits.stopWaitSeconds) {
                "the run has not returned \(limits.stopWaitSeconds) s after its timeout (a handler is busy)"
            }
            return .deferred
        }
        r.add("POST", "/api/threads/{id}/stop") { ctx throws(RunLoopError) in
            _ = try ctx.body([])
            let target = try worker(ctx)
            let once = Once(ctx.respond)
            target.stop { once.fire(exit: $0) }
            once.expire(after: limits.stopWaitSeconds) {
                "CFRunLoopStop was called but the run has not returned within \(limits.stopWaitSeconds) s (a handler is busy); it stops when the handler returns"
            }
            return .deferred
        }
        r.add("POST", "/api/threads/{id}/wakeup") { ctx throws(RunLoopError) in
            _ = try ctx.body([])
            let target = try worker(ctx)
            try target.wakeUp()
            return .json(
                200, ["thread": .string(target.id), "woken": true, "state": .string(target.snapshot.state.rawValue)])
        }
        r.add("GET", "/api/threads/{id}/log") { ctx throws(RunLoopError) in
            let target = try worker(ctx)
            let counters = target.counterValues.mapValues { Value.number(Double($0)) }
            return .json(200, ["lines": .array(target.log.map(Value.string)), "counters": .object(counters)])
        }
    }

    // MARK: perform

    private func addPerform(_ r: inout Router) {
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
            try target.perform(spec, timeout: callerWait) { result in
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

    // MARK: timers

    private func addTimers(_ r: inout Router) {
        r.add("POST", "/api/threads/{id}/timers") { ctx throws(RunLoopError) in
            let body = try ctx.body(["interval", "repeats", "delay", "tolerance", "mode", "action", "maxFires"])
            let target = try worker(ctx)
            guard let interval = try body.number("interval") else {
                throw .badValue("interval", "interval is required (seconds between fires)")
            }
            let repeats = try body.bool("repeats") ?? true
            guard !repeats || interval >= limits.minTimerInterval else {
                throw .badValue(
                    "interval", "a repeating timer's interval must be >= \(limits.minTimerInterval) seconds")
            }
            let spec = TimerSpec(
                interval: interval, repeats: repeats, delay: try body.number("delay"),
                tolerance: try body.number("tolerance") ?? 0, mode: try body.mode("mode") ?? .default,
                action: try body.selectorCall("action"),
                maxFires: try body.integer("maxFires", min: 1, max: 1_000_000_000))
            let timer = try target.addTimer(spec)
            return .json(201, Rep.timer(timer), headers: [("Location", "/api/threads/\(target.id)/timers/\(timer.id)")])
        }
        r.add("GET", "/api/threads/{id}/timers") { ctx throws(RunLoopError) in
            .json(200, ["timers": .array(try worker(ctx).timerSnapshots().map(Rep.timer))])
        }
        r.add("GET", "/api/threads/{id}/timers/{tid}") { ctx throws(RunLoopError) in
            .json(200, Rep.timer(try worker(ctx).timerSnapshot(ctx.param("tid"))))
        }
        r.add("DELETE", "/api/threads/{id}/timers/{tid}") { ctx throws(RunLoopError) in
            .json(200, Rep.timer(try worker(ctx).invalidateTimer(ctx.param("tid"))))
        }
    }

    // MARK: sources

    private func addSources(_ r: inout Router) {
        r.add("POST", "/api/threads/{id}/sources") { ctx throws(RunLoopError) in
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
                201, Rep.source(source), headers: [("Location", "/api/threads/\(target.id)/sources/\(source.id)")])
        }
        r.add("GET", "/api/threads/{id}/sources") { ctx throws(RunLoopError) in
            .json(200, ["sources": .array(try worker(ctx).sourceSnapshots().map(Rep.source))])
        }
        r.add("GET", "/api/threads/{id}/sources/{sid}") { ctx throws(RunLoopError) in
            .json(200, Rep.source(try worker(ctx).sourceSnapshot(ctx.param("sid"))))
        }
        r.add("DELETE", "/api/threads/{id}/sources/{sid}") { ctx throws(RunLoopError) in
            .json(200, Rep.source(try worker(ctx).invalidateSource(ctx.param("sid"))))
        }
        r.add("POST", "/api/threads/{id}/sources/{sid}/signal") { ctx throws(RunLoopError) in
            let body = try ctx.body(["wakeup"])
            let target = try worker(ctx)
            let wake = try body.bool("wakeup") ?? true
            let source = try target.signalSource(ctx.param("sid"), wakeUp: wake)
            var object = Rep.source(source).object ?? [:]
            object["wakeup"] = .bool(wake)
            return .json(200, .object(object))
        }
        r.add("POST", "/api/threads/{id}/sources/{sid}/messages") { ctx throws(RunLoopError) in
            let body = try ctx.body(["msgid", "data"])
            let target = try worker(ctx)
            let msgid = try body.integer("msgid", min: 0, max: 2_147_483_647) ?? 0
            let data = try body.string("data", maxLength: registry.limits.maxMessageBytes) ?? ""
            let source = try target.sendMessage(toSource: ctx.param("sid"), msgid: msgid, data: data)
            return .json(202, Rep.source(source))
        }
    }

    // MARK: modes and observers

    private func addModesAndObservers(_ r: inout Router) {
        r.add("GET", "/api/threads/{id}/modes") { ctx throws(RunLoopError) in
            .json(200, Rep.modes(try worker(ctx).modes()))
        }
        r.add("POST", "/api/threads/{id}/modes/common") { ctx throws(RunLoopError) in
            let body = try ctx.body(["mode"])
            guard let mode = try body.mode("mode") else { throw .badValue("mode", "mode is required") }
            return .json(200, Rep.modes(try worker(ctx).addCommonMode(mode)))
        }
        r.add("POST", "/api/threads/{id}/observers") { ctx throws(RunLoopError) in
            let body = try ctx.body(["activities", "repeats", "mode", "order"])
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
                order: try body.integer("order", min: -1_000_000, max: 1_000_000) ?? 0)
            return .json(201, Rep.observer(try target.addObserver(spec)))
        }
        r.add("DELETE", "/api/threads/{id}/observers/{oid}") { ctx throws(RunLoopError) in
            .json(200, Rep.observer(try worker(ctx).invalidateObserver(ctx.param("oid"))))
        }
        r.add("GET", "/api/threads/{id}/observers") { ctx throws(RunLoopError) in
            .json(200, ["observers": .array(try worker(ctx).observerSnapshots().map(Rep.observer))])
        }
        r.add("GET", "/api/threads/{id}/activity") { ctx throws(RunLoopError) in
            let target = try worker(ctx)
            var since: UInt64 = 0
            if let text = ctx.request.query["since"] {
                // Digits only (no sign); a seq beyond UInt64 is past every record.
                guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
                    throw .badValue("since", "since must be a non-negative whole number (a seq)")
                }
                since = UInt64(text) ?? .max
            }
            let records = target.activities(since: since)
            return .json(
                200,
                [
                    "activity": .array(records.map(Rep.activity)),
                    "lastSeq": .number(Double(records.last?.seq ?? since)),
                ])
        }
    }

    // MARK: tasks

    private func addTasks(_ r: inout Router) {
        r.add("POST", "/api/threads/{id}/tasks") { ctx throws(RunLoopError) in
            let body = try ctx.body(["id", "selector", "args"])
            let target = try worker(ctx)
            let taskId = try body.requiredString("id", maxLength: 64)
            let queue = try target.addTask(id: taskId, call: try body.selectorCallHere())
            return .json(201, Rep.tasks(queue))
        }
        r.add("GET", "/api/threads/{id}/tasks") { ctx throws(RunLoopError) in
            .json(200, Rep.tasks(try worker(ctx).taskSnapshot()))
        }
        r.add("DELETE", "/api/threads/{id}/tasks") { ctx throws(RunLoopError) in
            let target = try worker(ctx)
            let removed = try target.removeAllTasks()
            var object = Rep.tasks(target.taskSnapshot()).object ?? [:]
            object["removed"] = .number(Double(removed))
            return .json(200, .object(object))
        }
        r.add("DELETE", "/api/threads/{id}/tasks/{taskId}") { ctx throws(RunLoopError) in
            .json(200, Rep.tasks(try worker(ctx).removeTask(id: ctx.param("taskId"))))
        }
        r.add("POST", "/api/threads/{id}/tasks/suspend") { ctx throws(RunLoopError) in
            _ = try ctx.body([])
            return .json(200, Rep.tasks(try worker(ctx).setTasksSuspended(true)))
        }
        r.add("POST", "/api/threads/{id}/tasks/resume") { ctx throws(RunLoopError) in
            _ = try ctx.body([])
            return .json(200, Rep.tasks(try worker(ctx).setTasksSuspended(false)))
        }
        r.add("POST", "/api/threads/{id}/tasks/execute") { ctx throws(RunLoopError) in
            let body = try ctx.body(["selector", "args"])
            let target = try worker(ctx)
            let performId = try target.executeTask(try body.selectorCallHere())
            return .json(202, ["performId": .string(performId), "thread": .string(target.id)])
        }
    }
}

/// Delivers the first of several possible answers (result vs. deadline).
final class Once: @unchecked Sendable {
    private let lock = NSLock()
    private var done = false
    private var deadline: DeadlineToken?
    private let respond: @Sendable (HTTPResponse) -> Void

    init(_ respond: @escaping @Sendable (HTTPResponse) -> Void) { self.respond = respond }

    func fire(_ response: HTTPResponse) {
        lock.lock()
        let first = !done
        done = true
        let deadline = self.deadline
        self.deadline = nil
        lock.unlock()
        guard first else { return }
        deadline?.cancel()
        respond(response)
    }

    /// Answers with the exit of a run (200) or why there is none.
    func fire(exit result: Result<RunExit, RunLoopError>) {
        switch result {
        case .success(let exit): fire(APIResponses.json(200, Rep.exit(exit)))
        case .failure(let error): fire(APIResponses.error(error))
        }
    }

    /// Answers 504 `deadline_exceeded` with `message` after `seconds` unless an
    /// answer came first; the first answer cancels the deadline (nothing stays
    /// queued behind a fast reply).
    func expire(after seconds: Double, message: @escaping @Sendable () -> String) {
        let token = Deadlines.after(seconds) { [self] in
            fire(APIResponses.error(RunLoopError(kind: .deadline, code: "deadline_exceeded", message: message())))
        }
        lock.lock()
        let answered = done
        if !answered { deadline = token }
        lock.unlock()
        if answered { token.cancel() }
    }
}
