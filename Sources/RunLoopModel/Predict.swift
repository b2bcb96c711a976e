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
        func play(flip: Int?) -> (Prediction, Int, gaveUp: Bool) {
            var sim = RunSimulator(
                model: model, mode: mode, seconds: seconds, returnAfterSourceHandled: returnAfterSourceHandled,
                stimuli: stimuli, margin: margin)
            sim.flip = flip
            sim.budget = budget
            let prediction = underWay.map { sim.runUnderWay($0) } ?? sim.run()
            return (prediction, sim.decisions, sim.outOfBudget)
        }
        var (base, decisions, _) = play(flip: nil)
        if model.depth > 0 {
            base.reasons.insert(
                "the thread is inside \(model.depth) run\(model.depth == 1 ? "" : "s") now: this run would be nested in them",
                at: 0)
        }
        guard decisions > 0 else { return base }
        var outcomes = [base.outcome]
        var whys = base.reasons
        for flip in 0..<min(decisions, 4) where budget.left > 0 {
            let (other, _, gaveUp) = play(flip: flip)
            if gaveUp { break }  // not an outcome: the work ran out
            outcomes.append(other.outcome)
            whys.append(contentsOf: other.reasons.filter { !whys.contains($0) })
        }
        let key: (Prediction.Outcome) -> String = { o in
            "\(o.exitReason?.name ?? "none")|\(o.cause?.code ?? "")|\(o.cause.map { "\($0.details)" } ?? "")"
        }
        var distinct: [Prediction.Outcome] = []
        for outcome in outcomes where !distinct.contains(where: { key($0) == key(outcome) }) {
            distinct.append(outcome)
        }
        let times = outcomes.compactMap(\.atMs)
        if let lo = times.min(), let hi = times.max(), hi > lo { base.windowMs = [lo, hi] }
        if distinct.count > 1 {
            base.certain = false
            base.race = Prediction.Race(
                outcomes: distinct,
                why: "timing decides: " + (base.reasons.last ?? "two things are ready at nearly the same moment"))
        } else {
            base.certain = true
        }
        return base
    }
}
