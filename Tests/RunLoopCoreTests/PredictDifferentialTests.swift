import Foundation
import Primitives
import RunLoopTestSupport
import Testing

@testable import RunLoopCore

extension PredictHarness {
    /// Every way the real run differs from the prediction.
    func compare(
        _ p: Prediction, _ exit: RunExit, _ turns: [TurnRecord], atMs: Double, _ rename: (String) -> String
    ) -> [String] {
        var out: [String] = []
        guard p.certain else { return ["the predictor saw a race in a setup meant to have none: \(p.reasons)"] }
        if p.exitReason != exit.reason {
            out.append("exitReason: predicted \(p.exitReason?.name ?? "none"), got \(exit.reason.name)")
        }
        if p.cause?.code != exit.cause?.code {
            out.append("cause code: predicted \(p.cause?.code ?? "none"), got \(exit.cause?.code ?? "none")")
        } else if let predicted = p.cause.map({ Self.renamed(.object($0.details), rename) }),
            predicted != .object(exit.cause?.details ?? [:])
        {
            out.append("cause details: predicted \(predicted), got \(exit.cause?.details ?? [:])")
        }
        if let predictedMs = p.atMs, abs(predictedMs - atMs) > Self.toleranceMs {
            out.append("time: predicted \(predictedMs) ms, got \(atMs) ms")
        }
        let expected = p.turns.map { Self.describe($0.wokeBy, $0.callouts, $0.end, rename) }
        let got = turns.map { Self.describe($0.wokeBy, $0.callouts.map(\.ref), $0.end, { $0 }) }
        if expected != got { out.append("turns: predicted \(expected), got \(got)") }
        return out
    }

    static func describe(_ woke: WokeBy, _ callouts: [CalloutRef], _ end: TurnEnd, _ rename: (String) -> String)
        -> String
    {
        let list = callouts.map { "\($0.kind.rawValue) \(rename($0.id))" }.joined(separator: ", ")
        return "[\(woke.kind.rawValue)\(woke.id.map { " " + rename($0) } ?? ""): \(list) | \(end.rawValue)]"
    }

    /// `value` with every string passed through `rename` (placeholder ids).
    static func renamed(_ value: Value, _ rename: (String) -> String) -> Value {
        switch value {
        case .string(let text):
            if text.hasPrefix("perform:") { return .string("perform:" + rename(String(text.dropFirst(8)))) }
            return .string(rename(text))
        case .array(let items): return .array(items.map { renamed($0, rename) })
        case .object(let fields): return .object(fields.mapValues { renamed($0, rename) })
        default: return value
        }
    }
}

/// The differential test: generated loops, predicted, then run for real.
@Suite struct PredictDifferentialTests {
    static let seedsFile = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("predict-failed-seeds.txt")

    /// The seeds that ever failed, replayed every run.
    static func keptSeeds() -> [UInt64] {
        let text = (try? String(contentsOf: seedsFile, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            UInt64(line.split(separator: "#").first?.trimmingCharacters(in: .whitespaces) ?? "")
        }
    }

    /// The setup of `seed` as a top-level run and as a nested one; with a
    /// callout's nested run, also without it (as seeds kept before the
    /// generator made those played).
    /// Kept seeds are played from both generators: as kept before issue 38
    /// widened it, and widened.
    static func bothWays(_ seed: UInt64) -> [PredictSetup] {
        [false, true].flatMap { widened in
            let made = PredictSetup.make(seed: seed, widened: widened)
            return made.calloutRun == nil ? [made] : [made, made.withoutCalloutRun]
        }.flatMap { setup in
            var top = setup
            top.nested = false
            var nested = setup
            nested.nested = true
            return [top, nested]
        }
    }

    /// The setups' seeds: the first is the run's seed itself, so
    /// `PREDICT_SEED=s PREDICT_SETUPS=1` replays one setup.
    static func seeds(run seed: UInt64, count: Int) -> [UInt64] {
        var mix = SplitMix(seed)
        return [seed] + (1..<max(1, count)).map { _ in mix.next() }
    }

    /// Played off the cooperative pool: the whole suite's async tests share its
    /// two threads, and a minute of blocking waits here would stall them.
    @Test func predictionsAgreeWithRealRuns() async throws {
        let env = ProcessInfo.processInfo.environment
        let seed = SplitMix.seed("PREDICT_SEED", test: "predict differential")
        let count = env["PREDICT_SETUPS"].flatMap { Int($0) } ?? 1000
        let kept = Self.keptSeeds()
        print("predict differential: \(count) setups, \(kept.count) kept seeds")
        // PREDICT_REPEAT=n plays the one setup PREDICT_SEED n times (a probe).
        let repeats = env["PREDICT_REPEAT"].flatMap { Int($0) }
        // A kept seed is played both as a top-level run and nested.
        let all =
            repeats.map { Array(repeating: PredictSetup.make(seed: seed), count: $0) }
            ?? kept.flatMap { Self.bothWays($0) }
            + Self.seeds(run: seed, count: count).map { PredictSetup.make(seed: $0) }
        let started = Monotonic.now()
        let (failures, replays, unplayed) = try await offThePool { [all] in try Self.playAll(all) }
        print(
            "predict differential: \(all.count) setups (\(all.filter(\.nested).count) nested, \(all.filter { $0.calloutRun != nil }.count) with a callout's nested run) in \(String(format: "%.1f", Monotonic.now() - started)) s, \(failures.count) disagreements, \(replays) replays of setups played late, \(unplayed) never played on time"
        )
        // A setup the machine never played on time (every attempt had a
        // stimulus, the run's start or a wake late) is not judged; if many
        // are, the machine was too busy to judge this run at all.
        #expect(
            unplayed * Self.unplayedShare <= all.count,
            "\(unplayed) of \(all.count) setups were never played on time: the machine is too busy to judge")
        for (setup, problems) in failures.prefix(20) {
            Issue.record("setup \(setup.seed) disagrees: \(problems.joined(separator: "; "))\n\(setup)")
        }
        let fresh = failures.map(\.0.seed).filter { !kept.contains($0) }
        if !fresh.isEmpty {
            let lines = fresh.map { "\($0)  # run seed \(seed)\n" }.joined()
            if let handle = try? FileHandle(forWritingTo: Self.seedsFile) {
                handle.seekToEndOfFile()
                handle.write(Data(lines.utf8))
                try? handle.close()
            } else {
                try? lines.write(to: Self.seedsFile, atomically: true, encoding: .utf8)
            }
        }
        #expect(failures.isEmpty)
    }

    /// The generator's grid holds only if every nested run ends on a slot
    /// it claimed. A callout's item outside the run's mode is fired only by
    /// a nesting observer's run, at whatever event woke the loop, so the two
    /// never come together (kept seed 13927038608326503265 had them: the
    /// callout's run ended on a stimulus's slot).
    @Test func noNestingObserverFiresACalloutItemOutsideTheRunMode() {
        let seed = SplitMix.seed("GENERATOR_SEED", test: "generator grid")
        var mix = SplitMix(seed)
        var outside = 0
        for setupSeed in [13_927_038_608_326_503_265] + (0..<20_000).map({ _ in mix.next() }) {
            let setup = PredictSetup.make(seed: setupSeed)
            guard let modes = setup.calloutItemModes, !modes.contains(setup.runMode) else { continue }
            outside += 1
            let nesting = setup.observers.compactMap { observer -> String? in
                if case .runNested(let mode, _, _) = observer.action { mode } else { nil }
            }
            #expect(!nesting.contains(where: modes.contains), "setup \(setupSeed): \(setup)")
        }
        // The case is generated, or this test would check nothing.
        #expect(outside > 100, "\(outside) setups with a callout's item outside the run's mode")
    }

    /// A harness thread held past the run's end never makes the setup's
    /// stop (slot 1 of 2): that setup was not played as planned (nil, played
    /// again), not a disagreement. Kept seed 16862391073014902233 under
    /// load: "a stop unanswered until the deadline" was a stop never sent.
    @Test func stimuliALateHarnessNeverMadeAreNotJudged() throws {
        var harness = PredictHarness()
        harness.beforeStimuli = { waitForRunEnd in waitForRunEnd() }
        let setup = PredictSetup.make(seed: 16_862_391_073_014_902_233, widened: false).withoutCalloutRun
        #expect(setup.stimuli.count == 1 && setup.deadlineSlot == 2)
        let problems = try harness.play(setup)
        #expect(problems == nil, "judged though its stop was never made: \(problems ?? [])")
    }

    /// CF's run timeout is a one-shot dispatch timer that wakes the loop;
    /// firing while a nested run runs, it wakes that run. Here the nested
    /// run (a perform's `runNested`, 0.15 s) also handles the pass's last
    /// signalled source, and CF keeps only the last source's result: the
    /// outer pass counts as not having handled one, so the outer run
    /// (0.05 s) goes to sleep with its timeout spent and sleeps past its
    /// deadline. The predictor says so; the real run proves it.
    @Test func nestedRunThatTakesTheTimeoutLeavesTheRunAsleep() throws {
        let harness = PredictHarness()
        let worker = try harness.registry.createWorker(
            WorkerOptions(keepAlive: .none, policy: RunPolicy(style: .manual)))
        defer { worker.endAndWait(timeout: 10) }
        let source = try worker.addSource(SourceSpec(kind: .custom, mode: .default, order: 2)).id
        _ = try worker.signalSource(source, wakeUp: false)
        let nested = SelectorCall(
            selector: "runNested", args: ["mode": .string("default"), "seconds": .number(0.15)])
        _ = try worker.perform(PerformSpec(call: nested, modes: [.default]))
        let prediction = try worker.predict(mode: .default, seconds: 0.05, returnAfterSourceHandled: false)
        #expect(prediction.exitReason == nil, "\(prediction.reasons)")
        #expect(prediction.nested.map(\.exitReason) == [.timedOut])
        #expect(prediction.reasons.last?.contains("sleeps past its deadline") == true, "\(prediction.reasons)")
        // A stop wakes it; the pass then ends it as timed out (CF checks the
        // deadline before the stop flag).
        let woken = Worker.predict(
            worker.loopModel(), mode: "default", seconds: 0.05, returnAfterSourceHandled: false,
            stimuli: [Stimulus(at: 0.6, .stop(PredictHarness.stopOrigin))])
        #expect(woken.exitReason == .timedOut && abs((woken.atMs ?? 0) - 600) < 1, "\(woken.reasons)")
        let pending = try worker.startRun(.default, seconds: 0.05)
        // Well past both deadlines, the run has not returned by itself.
        #expect(pending.wait(0.6) == nil, "the run returned by itself")
        #expect(try worker.stopAndWait().get().reason == .timedOut)
        #expect(try pending.wait(5)?.get().reason == .timedOut)
    }

    /// Attempts at a setup the machine could not play on time.
    static let attempts = 5

    /// Plays every seed on `threads` threads at once (runs mostly sleep).
    /// A setup played late (see `PredictHarness.play`) is played again.
    /// Setups played at once: eight, or two under ThreadSanitizer
    /// (E2E_SLOWDOWN), where eight loops on two cores play most stimuli late.
    static let playThreads = ServerProcess.slowdown > 1 ? 2 : 8

    /// A run judges only if at most 1 in `unplayedShare` setups never played
    /// on time. Every setup played on time is judged, whatever the load; one
    /// played late is played again, and one never played on time is counted,
    /// not judged. The share guards the harness (one that plays nothing on
    /// time would judge nothing), not the machine: with two CPU hogs per core
    /// beside it (`stress-ng --cpu 4`, issue 41) the phase differential played
    /// 9 to 17 of 60 setups late on every attempt, and the suite must hold.
    static let unplayedShare = 2

    static func playAll(_ setups: [PredictSetup], threads: Int = playThreads) throws -> (
        failures: [(PredictSetup, [String])], replays: Int, unplayed: Int
    ) {
        let harness = PredictHarness()
        let outcome = ParallelPlays.play(setups, threads: threads, attempts: attempts) { try harness.play($0) }
        return (outcome.failures, outcome.replays, outcome.unplayed)
    }
}
