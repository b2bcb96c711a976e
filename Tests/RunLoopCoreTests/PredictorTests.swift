import CFOracle
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
        // The race says what it is about: the decision taken the other way.
        #expect(
            race.why == "the run's timeout and the mode's next timer fall within 2 ms of each other at 500 ms: "
                + "which comes first is timing", "\(race.why)")
    }

    static func source(_ id: String, order: Int) -> LoopModel.Source {
        LoopModel.Source(
            id: id, port: false, modeNames: ["default"], modes: ["default"], order: order, signalled: true)
    }

    /// CF sorts the signalled version-0 sources by order alone: two of
    /// equal order run in its set's order, which nobody chooses. With
    /// `returnAfterSourceHandled` only the first runs: either may be the
    /// one the run answers with, and the answer names both.
    @Test func signalledSourcesOfEqualOrderAreARaceNamingEach() throws {
        let model = LoopModel(
            sources: [Self.source("s1", order: 0), Self.source("s2", order: 0)], everFilled: ["default"])
        let p = Worker.predict(model, mode: "default", seconds: 1, returnAfterSourceHandled: true)
        #expect(!p.certain)
        let race = try #require(p.race)
        let handled = race.outcomes.compactMap { $0.cause?.details["source"] }.map { "\($0)" }
        #expect(Set(handled) == ["string(\"s1\")", "string(\"s2\")"], "\(handled)")
        #expect(race.outcomes.allSatisfy { $0.exitReason == .handledSource })
        #expect(
            race.why == "version-0 sources of equal order are signalled together, s1 and s2 (order 0): "
                + "CF runs them in its set's order, which nobody chooses; the run returns after the first one handled",
            "\(race.why)")

        // Orders that differ decide it.
        let ordered = LoopModel(
            sources: [Self.source("s1", order: 1), Self.source("s2", order: 0)], everFilled: ["default"])
        let first = Worker.predict(ordered, mode: "default", seconds: 1, returnAfterSourceHandled: true)
        #expect(first.certain)
        #expect(first.race == nil)
        #expect(first.cause?.details["source"] == .string("s2"))

        // Without it both run in the pass, and the run ends alike either way.
        let both = Worker.predict(model, mode: "default", seconds: 0.3, returnAfterSourceHandled: false)
        #expect(both.exitReason == .timedOut)
        #expect(both.certain)
        #expect(both.race == nil)
    }

    /// Three or more of equal order: each is played first once, so the race
    /// names every source the run may answer with (a reversal played only
    /// the first and the last). Two groups are two decisions.
    @Test func everySourceOfAnEqualOrderGroupMayBeFirst() throws {
        let model = LoopModel(
            sources: [
                Self.source("s1", order: 0), Self.source("s2", order: 0), Self.source("s3", order: 0),
                Self.source("s4", order: 2), Self.source("s5", order: 2),
            ], everFilled: ["default"])
        let p = Worker.predict(model, mode: "default", seconds: 1, returnAfterSourceHandled: true)
        #expect(!p.certain)
        let race = try #require(p.race)
        let handled = race.outcomes.compactMap { $0.cause?.details["source"] }.map { "\($0)" }
        #expect(Set(handled) == ["string(\"s1\")", "string(\"s2\")", "string(\"s3\")"], "\(handled)")
        // Only the order-0 group decides what the run answers with.
        #expect(
            race.why == "version-0 sources of equal order are signalled together, s1, s2 and s3 (order 0): "
                + "CF runs them in its set's order, which nobody chooses; the run returns after the first one handled",
            "\(race.why)")
    }

    /// Plain CF on the same loop: two signalled sources of order 0 and a
    /// `returnAfterSourceHandled` run handle one of them, either; the
    /// other stays signalled. Which one is CF's set order.
    @Test func plainCFHandlesOneOfTwoSourcesOfEqualOrder() {
        let source = OracleSetup.Source(
            port: false, modes: ["default"], order: 0, signalled: true, wakeUp: false, messages: 0, action: nil)
        let setup = OracleSetup(
            quantum: 0.025, keepAlive: "port", runMode: "default", trackingIsCommon: false, startSlot: 0,
            deadlineSlot: 4, returnAfterSourceHandled: true, nested: false, timers: [], sources: [source, source],
            performs: [], observers: [], stimuli: [])
        var seen: [String: Int] = [:]
        for _ in 0..<10 {
            let result = CFOracle.play(setup)
            #expect(result.run.exitReason == "handledSource", "\(result.run)")
            #expect(result.run.handled.count == 1, "\(result.run.handled)")
            for label in result.run.handled { seen[label, default: 0] += 1 }
        }
        #expect(Set(seen.keys).isSubset(of: ["source s0", "source s1"]), "\(seen)")
        print("plain CF, two signalled sources of order 0 (10 plays): \(seen.sorted { $0.key < $1.key })")
    }

    /// A race whose two ways end alike is no race: the answer is certain.
    /// (Outcomes were once told apart by their details' printed order,
    /// which differs between two equal dictionaries: about one call in two
    /// answered "not certain" with the same outcome twice.)
    @Test func aRaceWhoseWaysEndAlikeIsCertain() {
        let port = LoopModel.Source(id: "s9", port: true, modeNames: ["default"], modes: ["default"], role: .keepAlive)
        let model = LoopModel(timers: [Self.timer("tm1", next: 0.1005)], sources: [port], everFilled: ["default"])
        let stimuli = [Stimulus(at: 0.1, .wakeUp)]
        for _ in 0..<20 {
            let p = Worker.predict(
                model, mode: "default", seconds: 0.5, returnAfterSourceHandled: false, stimuli: stimuli)
            #expect(p.exitReason == .timedOut)
            #expect(p.cause?.details["timerFires"] == .number(1))
            #expect(p.certain, "\(p.race.map(\.why) ?? "")")
            #expect(p.race == nil)
        }
    }

    /// A race whose every way ends in a run that cannot be played to its end
    /// is not certain (each way alike once told "certain").
    @Test func aRaceBetweenPlaysThatNeverEndIsNotCertain() {
        let forever = LoopModel.NestedRun(
            mode: "default", seconds: RunPolicy.distantFuture, returnAfterSourceHandled: false)
        let port = LoopModel.Source(id: "s9", port: true, modeNames: ["default"], modes: ["default"], role: .keepAlive)
        var source = Self.source("s1", order: 0)
        source.signalled = false
        source.nested = forever
        var timer = Self.timer("tm1", next: 0.1005)
        timer.nested = forever
        let model = LoopModel(timers: [timer], sources: [port, source], everFilled: ["default"])
        let stimuli = [Stimulus(at: 0.1, .signal(source: "s1", wakeUp: true))]
        let p = Worker.predict(
            model, mode: "default", seconds: 1, returnAfterSourceHandled: false, stimuli: stimuli)
        #expect(p.exitReason == nil)
        #expect(!p.certain, "\(p.reasons)")
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
