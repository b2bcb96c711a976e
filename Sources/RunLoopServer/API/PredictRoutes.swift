import Foundation
import RunLoopCore

/// Predict, then run: `POST /api/threads/{id}/predict` says what a run would
/// return without touching the loop. Checked on the control loop, played on
/// the predictions queue (`API.offload`).
extension API {
    func addPredict(_ r: inout Router) {
        r.add(.post, "/api/threads/{id}/predict") { ctx throws(RunLoopError) in
            let body = try ctx.body(["mode", "seconds", "returnAfterSourceHandled"])
            let target = try worker(ctx)
            // Read (and so checked) even when the thread's own style decides.
            let asked = try body.mode("mode")
            let askedSeconds = try body.number("seconds")
            let askedFlag = try body.bool("returnAfterSourceHandled")
            if asked?.isCommon == true {
                throw .badValue("mode", "a loop runs in one mode; common is a set of modes, not a mode to run in")
            }
            if let seconds = askedSeconds {
                guard seconds >= 0 else { throw .badValue("seconds", "seconds must be >= 0") }
                guard seconds <= limits.maxWaitSeconds else {
                    throw .badValue(
                        "seconds",
                        "seconds must be <= \(limits.maxWaitSeconds) (the server's longest wait, --max-wait)")
                }
            }
            let manual = target.policy.style == .manual
            guard !manual || askedSeconds != nil || target.hasRequestedRun else {
                // A manual thread: exactly what /run would accept, and its errors.
                throw .badValue("seconds", "seconds is required (how long this run may last)")
            }
            return offload(ctx, on: predictions) { () throws(RunLoopError) -> Value in
                guard manual else {
                    // A thread that runs its loop itself: its own style's next run.
                    return Rep.predicted(target, try target.predictOwnRun(), ownStyle: true)
                }
                // A manual thread inside its run: that run, from now (the body's
                // fields only checked: the run under way has its own).
                if target.hasRequestedRun, let (prediction, facts) = try target.predictRunUnderWay() {
                    return Rep.predictedUnderWay(target, prediction, facts)
                }
                guard let seconds = askedSeconds else {
                    throw .badValue("seconds", "seconds is required (how long this run may last)")
                }
                let prediction = try target.predict(
                    mode: asked ?? target.policy.mode, seconds: seconds, returnAfterSourceHandled: askedFlag ?? false)
                if target.hasRequestedRun {
                    throw .conflict(.alreadyRunning, "thread \(target.id) is already running a requested run")
                }
                return Rep.predicted(target, prediction, ownStyle: false)
            }
        }
    }
}

extension Rep {
    /// The answer of `POST /api/threads/{id}/predict`.
    static func predicted(_ worker: Worker, _ p: Prediction, ownStyle: Bool) -> Value {
        [
            "thread": .string(worker.id), "mode": .string(p.mode), "seconds": .number(p.seconds),
            "returnAfterSourceHandled": .bool(p.returnAfterSourceHandled),
            "style": .string(ownStyle ? worker.policy.style.rawValue : "manual"),
            "prediction": prediction(p), "about": .null,
        ]
    }

    /// The answer for a manual thread's run under way: its own mode, the
    /// seconds left and its flag, and `about` (which run, from when).
    static func predictedUnderWay(_ worker: Worker, _ p: Prediction, _ f: RunUnderWayFacts) -> Value {
        let about: Value = [
            "run": .number(Double(f.run)), "from": .string(Timestamp.string(f.from)),
            "startedAt": .string(Timestamp.string(f.startedAt)),
            "mode": .string(f.mode), "seconds": .number(f.seconds), "leftSeconds": .number(rounded3(f.leftSeconds)),
            "returnAfterSourceHandled": .bool(f.returnAfterSourceHandled), "depth": .number(Double(f.depth)),
            "asleep": .bool(f.asleep), "stopRequested": .bool(f.stopRequested),
            "signalled": .array(f.signalled.map(Value.string)), "messages": .array(f.messages.map(Value.string)),
            "pending": .array(f.pending.map(Value.string)),
        ]
        return [
            "thread": .string(worker.id), "mode": .string(p.mode), "seconds": .number(rounded3(p.seconds)),
            "returnAfterSourceHandled": .bool(p.returnAfterSourceHandled), "style": .string("manual"),
            "prediction": prediction(p), "about": about,
        ]
    }

    /// A prediction: exit reason, cause, when, certainty, race, reasons.
    static func prediction(_ p: Prediction) -> Value {
        var race: Value = .null
        if let r = p.race {
            race = ["outcomes": .array(r.outcomes.map(outcome)), "why": .string(r.why)]
        }
        return [
            "exitReason": p.exitReason.map { .string($0.name) } ?? .null,
            "cause": cause(p.cause),
            "atMs": p.atMs.map { .number(rounded3($0)) } ?? .null,
            "windowMs": p.windowMs.map { .array($0.map { .number(rounded3($0)) }) } ?? .null,
            "certain": .bool(p.certain), "race": race,
            "timerFiresRange": p.timerFiresRange.map {
                ["min": .number(Double($0.lowerBound)), "max": .number(Double($0.upperBound))]
            } ?? .null,
            "reasons": .array(p.reasons.map(Value.string)),
            "nested": .array(p.nested.map(nested)),
        ]
    }

    /// A nested run a callout of the predicted run starts (`runNested`):
    /// its parameters and its outcome.
    static func nested(_ p: Prediction) -> Value {
        let parameters: [String: Value] = [
            "mode": .string(p.mode), "seconds": .number(p.seconds),
            "returnAfterSourceHandled": .bool(p.returnAfterSourceHandled),
        ]
        return .object(parameters.merging(outcome(p.outcome).object ?? [:]) { own, _ in own })
    }

    static func outcome(_ o: Prediction.Outcome) -> Value {
        [
            "exitReason": o.exitReason.map { .string($0.name) } ?? .null, "cause": cause(o.cause),
            "atMs": o.atMs.map { .number(rounded3($0)) } ?? .null,
        ]
    }
}
