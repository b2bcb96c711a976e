import Testing

@testable import RunLoopModel

/// The predictor's budget holds within a small bound (issue 41): it is
/// checked after each pass and before each timer fire, so a play overshoots
/// its steps by at most one fire's scan of the timers and one pass over the
/// items. Played on the model alone (a snapshot, no worker, no CF).
@Suite("Predict budget bound")
struct PredictBudgetBoundTests {
    /// `count` timers every 100 µs, all due now, each with a fire limit (so
    /// fast-forward cannot count them: every fire is played).
    private static func dueTogether(_ count: Int) -> LoopModel {
        var model = LoopModel(everFilled: ["default"])
        for index in 0..<count {
            model.timers.append(
                LoopModel.Timer(
                    id: "tm\(index)", modeNames: ["default"], modes: ["default"], next: 0, interval: 0.0001,
                    maxFires: 1_000_000))
        }
        return model
    }

    @Test(
        "a play given its last steps overshoots by one fire's scan and one pass, not a pass of n² fires",
        arguments: [1, 10, 1000, 50_000])
    func overshootIsBounded(steps: Int) {
        let timers = 300
        let model = Self.dueTogether(timers)
        let budget = PredictBudget(steps: steps)
        let p = Predictor.predict(model, mode: "default", seconds: 100, returnAfterSourceHandled: false, budget: budget)
        #expect(budget.ranOut)
        #expect(p.exitReason == nil && !p.certain, "\(p.reasons)")
        #expect(p.reasons.contains { $0.contains("too long to play here") }, "\(p.reasons)")
        // One fire's scan (300 timers) and one pass over the 300 items.
        let bound = timers + (1 + model.itemCount)
        #expect(budget.spent >= steps && budget.spent <= steps + bound, "spent \(budget.spent) of \(steps)")
    }

    @Test("the check before each fire changes nothing for a play within its budget")
    func withinTheBudgetEveryFireIsPlayed() {
        // Three timers due together, each fired at most twice: 6 fires, a few
        // passes, far below the budget: played to its end, all fires counted.
        var model = LoopModel(everFilled: ["default"])
        for index in 0..<3 {
            model.timers.append(
                LoopModel.Timer(
                    id: "tm\(index)", modeNames: ["default"], modes: ["default"], next: 0.01, interval: 0.01,
                    maxFires: 2))
        }
        let budget = PredictBudget(steps: 1000)
        let p = Predictor.predict(model, mode: "default", seconds: 1, returnAfterSourceHandled: false, budget: budget)
        #expect(!budget.ranOut && p.exitReason == .finished, "\(p.reasons)")
        #expect(p.turns.flatMap(\.callouts).filter { $0.kind == .timer }.count == 6, "\(p.turns)")
    }
}
