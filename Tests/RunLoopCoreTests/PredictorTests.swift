import Foundation
import Testing

@testable import RunLoopCore

/// The predictor on hand-made models: races named with both outcomes, a
/// long run counted rather than played, the wake-up of a timerfd CF left
/// armed, and a run that does not return by itself.
@Suite struct PredictorTests {
    static func timer(_ id: String, next: Double, interval: Double? = nil, mode: String = "default")
        -> LoopModel.Timer
    {
        LoopModel.Timer(id: id, modeNames: [mode], modes: [mode], next: next, interval: interval)
    }

    @Test func aTimerDueAtTheDeadlineIsARaceWithBothOutcomes() throws {
        let model = LoopModel(timers: [Self.timer("tm1", next: 0.5005)], everFilled: ["default"])
        let p = Worker.predict(model, mode: "default", seconds: 0.5, returnAfterSourceHandled: false)
        #expect(!p.certain)
        let race = try #require(p.race)
        let fires = race.outcomes.compactMap { $0.cause?.details["timerFires"] }
        #expect(Set(fires.map { "\($0)" }).count == 2, "\(race.outcomes.map(\.cause))")
        #expect(race.outcomes.allSatisfy { $0.exitReason == .timedOut })
        #expect(!race.why.isEmpty)
    }

    @Test func aFastRepeatingTimerIsCountedUpToTheDeadline() {
        let model = LoopModel(timers: [Self.timer("tm1", next: 0.001, interval: 0.001)], everFilled: ["default"])
        let p = Worker.predict(model, mode: "default", seconds: 300, returnAfterSourceHandled: false)
        #expect(p.exitReason == .timedOut)
        #expect(p.cause?.details["timerFires"] == .number(300_000))
        #expect(p.atMs == 300_000)
    }

    @Test func aLoopTooLongToPlayIsGivenUpWithinTheCallsBudget() {
        // 300 timers every 100 µs, each with a fire limit (so not counted by
        // fast-forward): 4,000 passes of 300 items are more than one call may
        // play on the control loop. Every mode of a /why shares the budget.
        var timers: [LoopModel.Timer] = []
        for index in 1...300 {
            var timer = Self.timer("tm\(index)", next: 0.0001, interval: 0.0001)
            timer.maxFires = 1_000_000
            timers.append(timer)
        }
        let model = LoopModel(timers: timers, everFilled: ["default"])
        let budget = PredictBudget()
        let p = Worker.predict(model, mode: "default", seconds: 100, returnAfterSourceHandled: false, budget: budget)
        #expect(p.exitReason == nil)
        #expect(!p.certain)
        #expect(p.reasons.last?.contains("too long to play here") == true, "\(p.reasons)")
        #expect(budget.left <= 0)
        // The budget counts the work as it is done: each of the 300 fires of a
        // pass scans the other timers for CF's re-arm, 90,000 steps a pass, so
        // the budget is spent within a few passes (it once counted 301 a pass
        // and played 1,660 of them: 135 s of a debug build on the caller's thread).
        let played = p.reasons.last.flatMap { Int($0.prefix { $0.isNumber }) }
        #expect(played.map { $0 * 300 * 300 <= 2 * PredictBudget.perCall } == true, "\(p.reasons)")
        // The next mode's prediction of the same call plays nothing more.
        let next = Worker.predict(model, mode: "default", seconds: 100, returnAfterSourceHandled: false, budget: budget)
        #expect(next.exitReason == nil)
        #expect(next.reasons.last?.contains("1 pass played") == true, "\(next.reasons)")
    }

    @Test func aTimerfdLeftArmedWakesTheLoopOnceAndAnEmptyModeFinishes() {
        var model = LoopModel(
            sources: [LoopModel.Source(id: "s1", port: false, modeNames: ["default"], modes: ["default"])],
            everFilled: ["default"])
        model.staleTimerfd["default"] = 0.1
        let asleep = Worker.predict(model, mode: "default", seconds: 0.3, returnAfterSourceHandled: false)
        #expect(asleep.exitReason == .timedOut)
        #expect(asleep.turns.map(\.wokeBy.kind) == [.none, .wakeup, .timeout])
        // The source invalidated (no wake-up) before the stale date: the
        // stale wake-up finds the mode empty.
        let stimuli = [Stimulus(at: 0.05, .invalidateSource("s1", wakeUp: false))]
        let emptied = Worker.predict(
            model, mode: "default", seconds: 0.3, returnAfterSourceHandled: false, stimuli: stimuli)
        #expect(emptied.exitReason == .finished)
        #expect(emptied.cause?.code == "mode_empty")
        #expect(emptied.atMs == 100)
    }

    @Test func onlyTheKeepAlivePortNeverReturns() {
        let port = LoopModel.Source(id: "s1", port: true, modeNames: ["default"], modes: ["default"], role: .keepAlive)
        let model = LoopModel(sources: [port], everFilled: ["default"])
        let p = Worker.predict(
            model, mode: "default", seconds: RunPolicy.distantFuture, returnAfterSourceHandled: false)
        #expect(p.exitReason == nil)
        #expect(p.certain)
        let missing = Worker.predict(model, mode: "tracking", seconds: 1, returnAfterSourceHandled: false)
        #expect(missing.cause?.code == "mode_missing")
    }
}
