import Foundation
import Primitives
import RunLoopCore

/// Timers: add, list, read, invalidate. Run on the control loop.
extension API {
    func addTimers(_ r: inout Router) {
        r.add(.post, "/api/threads/{id}/timers") { ctx throws(RunLoopError) in
            let body = try ctx.body([
                "interval", "repeats", "delay", "tolerance", "mode", "modes", "action", "maxFires",
            ])
            let target = try worker(ctx)
            let delay = try body.number("delay")
            // A one-shot timer needs only its delay (CF ignores a one-shot timer's interval).
            guard let interval = try body.number("interval") ?? delay.map({ max($0, limits.minTimerInterval) }) else {
                throw .badValue(
                    "interval", "interval is required (seconds between fires), or delay for a one-shot timer")
            }
            let repeats = try body.bool("repeats") ?? body.has("interval")
            guard body.has("interval") || !repeats else {
                throw .badValue("interval", "a repeating timer needs interval (seconds between fires)")
            }
            guard !repeats || interval >= limits.minTimerInterval else {
                throw .badValue(
                    "interval", "a repeating timer's interval must be >= \(limits.minTimerInterval) seconds")
            }
            // Created with the modes it is answered with: `modes` (a list), or one `mode`.
            guard !(body.has("mode") && body.has("modes")) else {
                throw .badValue("modes", "give mode or modes, not both")
            }
            let one = try body.mode("mode") ?? .default
            let modes = try API.performModes(body) ?? [one]
            let spec = TimerSpec(
                interval: interval, repeats: repeats, delay: delay,
                tolerance: try body.number("tolerance") ?? 0, mode: modes[0],
                action: try body.selectorCall("action"),
                maxFires: try body.integer("maxFires", min: 1, max: 1_000_000_000))
            var timer = try target.addTimer(spec)
            var added: Set<String> = [spec.mode.name]
            for mode in modes.dropFirst() where added.insert(mode.name).inserted {
                timer = try target.addTimerMode(timer.id, mode: mode)
            }
            return .json(
                201, API.hinting(Rep.timer(timer), spec.mode),
                headers: [("Location", "/api/threads/\(target.id)/timers/\(timer.id)")])
        }
        r.add(.get, "/api/threads/{id}/timers") { ctx throws(RunLoopError) in
            .json(200, ["timers": .array(try worker(ctx).timerSnapshots().map(Rep.timer))])
        }
        r.add(.get, "/api/threads/{id}/timers/{tid}") { ctx throws(RunLoopError) in
            .json(200, Rep.timer(try worker(ctx).timerSnapshot(try owned(ctx, "timer", "tid"))))
        }
        r.add(.post, "/api/threads/{id}/timers/{tid}/modes") { ctx throws(RunLoopError) in
            let body = try ctx.body(["mode"])
            guard let mode = try body.mode("mode") else { throw .badValue("mode", "mode is required") }
            let timer = try worker(ctx).addTimerMode(try owned(ctx, "timer", "tid"), mode: mode)
            return .json(200, API.hinting(Rep.timer(timer), mode))
        }
        r.add(.delete, "/api/threads/{id}/timers/{tid}/modes/{mode}") { ctx throws(RunLoopError) in
            let target = try worker(ctx)
            let mode = try API.pathMode(ctx)
            let wake = try Self.queryBool(ctx, "wakeup") ?? false
            return .json(
                200, Rep.timer(try target.removeTimerMode(try owned(ctx, "timer", "tid"), mode: mode, wakeUp: wake)))
        }
        r.add(.delete, "/api/threads/{id}/timers/{tid}") { ctx throws(RunLoopError) in
            let wake = try Self.queryBool(ctx, "wakeup") ?? false
            return .json(200, Rep.timer(try worker(ctx).invalidateTimer(try owned(ctx, "timer", "tid"), wakeUp: wake)))
        }
    }
}
