/// The model of CF: what one `CFRunLoopRunInMode` returns, played over a
/// `LoopModel` alone (`RunSimulator`). This target reads only that snapshot
/// and cannot call CF: it imports no Foundation nor CoreFoundation
/// (scripts/model-imports.py, run by `make lint`). The engine
/// (`Worker.loopModel`) reads the snapshot under its own rules and hands it
/// here; plain CF (`CFOracle`) is the third room the differential asks.
public enum Predictor {
    /// What a run with these parameters does on `model` (pure: no worker
    /// involved). Where timing decides, each race is played both ways.
    /// `phaseKnown`: the run begins now, so its repeating timers' phases
    /// are known (a run under way, a test that starts it at once); false:
    /// it begins when a request reaches the loop, and each phase of those
    /// timers is played too (`widenByPhase`).
    public static func predict(
        _ model: LoopModel, mode: String, seconds: Double, returnAfterSourceHandled: Bool,
        stimuli: [Stimulus] = [], margin: Double = 0.002, budget: PredictBudget = PredictBudget(),
        phaseKnown: Bool = true
    ) -> Prediction {
        let base = predictAtPhase(
            model, mode: mode, seconds: seconds, returnAfterSourceHandled: returnAfterSourceHandled,
            stimuli: stimuli, margin: margin, budget: budget)
        guard !phaseKnown, stimuli.isEmpty else { return base }
        return widenByPhase(
            base, model, mode: mode, seconds: seconds, returnAfterSourceHandled: returnAfterSourceHandled,
            margin: margin, budget: budget)
    }

    /// `predict` at the repeating timers' phases of now.
    package static func predictAtPhase(
        _ model: LoopModel, mode: String, seconds: Double, returnAfterSourceHandled: Bool,
        stimuli: [Stimulus], margin: Double, budget: PredictBudget, underWay: RunSimulator.UnderWay? = nil
    ) -> Prediction {
        func play(flip: Int?) -> (Prediction, races: [String], gaveUp: Bool, settled: Bool) {
            var sim = RunSimulator(
                model: model, mode: mode, seconds: seconds, returnAfterSourceHandled: returnAfterSourceHandled,
                stimuli: stimuli, margin: margin)
            sim.flip = flip
            sim.budget = budget
            let prediction = underWay.map { sim.runUnderWay($0) } ?? sim.run()
            return (prediction, sim.races, sim.outOfBudget, !sim.unsettled)
        }
        var (base, races, _, settled) = play(flip: nil)
        if model.depth > 0 {
            base.reasons.insert(
                "the thread is inside \(model.depth) run\(model.depth == 1 ? "" : "s") now: this run would be nested in them",
                at: 0)
        }
        guard !races.isEmpty else { return base }
        // Alike: the same exit, cause code and details (compared as values:
        // a dictionary's printed order differs between two equal ones).
        let alike: (Prediction.Outcome, Prediction.Outcome) -> Bool = { a, b in
            a.exitReason == b.exitReason && a.cause?.code == b.cause?.code && a.cause?.details == b.cause?.details
        }
        var outcomes = [base.outcome]
        // The decisions that, taken the other way, change the answer: what
        // the race is about (`races[n]` says decision n in words).
        var whys: [String] = []
        for flip in 0..<min(races.count, 4) where budget.left > 0 {
            let (other, _, gaveUp, otherSettled) = play(flip: flip)
            if gaveUp { break }  // not an outcome: the work ran out
            outcomes.append(other.outcome)
            settled = settled && otherSettled
            if !alike(other.outcome, base.outcome), !whys.contains(races[flip]) { whys.append(races[flip]) }
        }
        var distinct: [Prediction.Outcome] = []
        for outcome in outcomes where !distinct.contains(where: { alike($0, outcome) }) {
            distinct.append(outcome)
        }
        let times = outcomes.compactMap(\.atMs)
        if let lo = times.min(), let hi = times.max(), hi > lo { base.windowMs = [lo, hi] }
        // Certain when every way the decisions go ends alike and each play
        // was taken to its end.
        base.certain = distinct.count == 1 && settled
        if distinct.count > 1 {
            base.race = Prediction.Race(outcomes: distinct, why: whys.joined(separator: "; "))
        }
        return base
    }
}
