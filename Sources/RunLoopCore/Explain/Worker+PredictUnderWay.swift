import CoreFoundation
import Foundation
import Primitives

/// The facts of a run under way that a prediction of it starts from: one
/// read of the run's frame (its mode, deadline, flag, depth, a stop asked
/// for), and of the loop (`loopModel`: what is signalled, queued, pending).
public struct RunUnderWayFacts: Sendable {
    /// The run's number (`RunExit.run`) and when it began.
    public var run: Int
    public var startedAt: Date
    /// When these facts were read: the prediction is from here on.
    public var from: Date
    public var mode: String
    /// Its timeout as asked, and what is left of it at `from`.
    public var seconds: Double
    public var leftSeconds: Double
    public var returnAfterSourceHandled: Bool
    /// How many runs deep it is (1: the thread's outermost run).
    public var depth: Int
    /// Asleep in its mode at `from`, or inside a pass.
    public var asleep: Bool
    /// A stop was asked for and has not ended it yet.
    public var stopRequested: Bool
    /// Custom sources signalled, ports holding messages, performs pending.
    public var signalled: [String]
    public var messages: [String]
    public var pending: [String]
}

extension Worker {
    /// What the run under way (the innermost) returns, played from now: its
    /// mode, the time left of its deadline and its own
    /// `returnAfterSourceHandled`, from its sleep if it sleeps now, a stop
    /// already asked for included. Its repeating timers' phases are fixed
    /// by its deadline, so their fires are counted exactly. nil: no run is
    /// under way.
    public func predictRunUnderWay() throws(RunLoopError) -> (Prediction, RunUnderWayFacts)? {
        let read = try book.withLock { b throws(RunLoopError) -> (RunFrame, Int, CFRunLoop?)? in
            try b.checkAlive(id)
            guard let frame = b.runStack.last else { return nil }
            return (frame, b.runStack.count, b.loop)
        }
        guard let (frame, depth, loop) = read else { return nil }
        let asleep = loop.map { CFRunLoopIsWaiting($0) } ?? false
        var model = loopModel()
        model.depth = 0
        let elapsed = Monotonic.now() - frame.startedMono
        let left = max(0.000_001, frame.seconds - elapsed)
        let from = Date()
        let facts = RunUnderWayFacts(
            run: frame.seq, startedAt: from.addingTimeInterval(-elapsed), from: from, mode: frame.mode,
            seconds: frame.seconds, leftSeconds: frame.seconds >= RunPolicy.distantFuture ? frame.seconds : left,
            returnAfterSourceHandled: frame.returnAfterSourceHandled, depth: depth, asleep: asleep,
            stopRequested: frame.stopRequested,
            signalled: model.sources.filter { $0.valid && !$0.port && $0.signalled }.map(\.id),
            messages: model.sources.filter { $0.valid && $0.port && $0.queued > 0 }.map(\.id),
            pending: model.performs.map(\.id))
        var stimuli: [Stimulus] = []
        if frame.stopRequested {
            stimuli.append(Stimulus(at: 0, .stop(frame.stopOrigin ?? .request(by: "a stop request", requestId: nil))))
        }
        let budget = requestBudget()
        defer { account(budget) }
        var prediction = Predictor.predictAtPhase(
            model, mode: frame.mode, seconds: facts.leftSeconds,
            returnAfterSourceHandled: frame.returnAfterSourceHandled, stimuli: stimuli, margin: 0.002,
            budget: budget, underWay: asleep ? .asleep : .busy)
        // A deadline's timer fires count the whole run's: those made so far
        // (its closed turns; asleep, every turn of it is closed) and to come.
        if var cause = prediction.cause, cause.code == "deadline", let ahead = cause.details["timerFires"]?.number {
            let made = turns(matching: TurnFilter(run: frame.seq)).turns.flatMap(\.callouts).filter {
                $0.ref.kind == .timer || $0.ref.throughTimer
            }.count
            cause = ExitCause.deadline(seconds: frame.seconds, timerFires: made + Int(ahead))
            prediction.outcome.cause = cause
        }
        let leftText = frame.seconds >= RunPolicy.distantFuture ? "no timeout" : String(format: "%.3f s left", left)
        prediction.reasons.insert(
            "run \(frame.seq) is under way (depth \(depth), \(frame.mode), \(leftText)"
                + (frame.returnAfterSourceHandled ? ", returnAfterSourceHandled" : "")
                + (asleep ? ", asleep now" : ", inside a pass now: played from its next pass")
                + (frame.stopRequested ? ", a stop asked for" : "") + "): played from now, not from its entry",
            at: 0)
        return (prediction, facts)
    }
}
