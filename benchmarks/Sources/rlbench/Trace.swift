import Foundation
import RunLoopCore
import RunLoopTestSupport

/// What the explainer (turns, callouts, stall watchdog, warnings) costs:
/// the same work with tracing on (the default) and off (`--no-trace`),
/// alternating in one run. Goal: no more than 5 % lost on the wake-up round
/// trip and on the HTTP hop.
enum TraceBenchmark {
    static func run(runloopd: String, publicDir: String, roundTrips: Int, rounds: Int, seconds: Int, out: String) {
        let started = nowMono()
        var section = Section(
            id: "trace", title: "The explainer's cost: tracing on (default) vs off (--no-trace)",
            command: "rlbench trace")
        var off = DiagnosticsOptions()
        off.tracing = false
        let traced = WorkerRegistry()
        let untraced = WorkerRegistry(diagnostics: off)
        var ratios: [Double] = []
        var onAll: [Double] = []
        var offAll: [Double] = []
        var steals: [Double] = []
        var clean = true
        var rows =
            "| round | traced p50 / p99 (µs) | untraced p50 / p99 (µs) | p50 ratio | steal |\n|---|---|---|---|---|\n"
        for round in 1...rounds {
            let result = measureClean("trace wake-up round \(round)") { () -> ([Double], [Double]) in
                // A B, then B A on the next round, so neither side always goes first.
                if round % 2 == 1 {
                    let a = WakeUpBenchmark.workerPerform(roundTrips, registry: traced)
                    return (a, WakeUpBenchmark.workerPerform(roundTrips, registry: untraced))
                }
                let b = WakeUpBenchmark.workerPerform(roundTrips, registry: untraced)
                return (WakeUpBenchmark.workerPerform(roundTrips, registry: traced), b)
            }
            let (a, b) = result.value
            let pa = Percentiles(a)
            let pb = Percentiles(b)
            onAll += a
            offAll += b
            ratios.append(pa.p50 / pb.p50)
            steals.append(result.steal)
            clean = clean && result.clean
            rows +=
                "| \(round) | \(WakeUpBenchmark.us(pa.p50)) / \(WakeUpBenchmark.us(pa.p99)) | \(WakeUpBenchmark.us(pb.p50)) / \(WakeUpBenchmark.us(pb.p99)) | \(fmt(pa.p50 / pb.p50, 3)) | \(fmt(result.steal, 1)) % |\n"
        }
        let ratio = median(ratios)
        let on = Percentiles(onAll)
        let offP = Percentiles(offAll)
        section.figures.append(
            Figure(
                name: "Worker.perform(echo) round trip p50, tracing on", value: WakeUpBenchmark.us(on.p50) + " µs",
                baseline: WakeUpBenchmark.us(offP.p50) + " µs (tracing off)", ratio: fmt(ratio, 3) + "×",
                goal: "≤ 1.05× off", pass: ratio <= 1.05, steal: steals.max() ?? 0, clean: clean))

        // The HTTP hop: perform echo + waitUntilDone through runloopd, traced vs not.
        let scriptPath = HopBenchmark.performScript("trace")
        func launch(_ extra: [String]) -> (ServerProcess, String) {
            HopBenchmark.serverWithThread(runloopd: runloopd, publicDir: publicDir, thread: "bench-trace", extra: extra)
        }
        let (tracedServer, tracedPath) = launch([])
        let (plainServer, plainPath) = launch(["--no-trace"])
        defer {
            tracedServer.stop(signal: SIGINT, grace: 8)
            plainServer.stop(signal: SIGINT, grace: 8)
        }
        let duel = HopBenchmark.alternate(
            "trace hop", a: (tracedServer.port, tracedPath), b: (plainServer.port, plainPath), rounds: rounds,
            seconds: seconds, script: scriptPath, columns: ("traced req/s", "--no-trace req/s"))
        let (aAll, bAll, hopRatios, hopSteals, hopClean) = (duel.a, duel.b, duel.ratios, duel.steals, duel.clean)
        rows += "\n" + duel.rows
        let hopRatio = median(hopRatios)
        section.figures.append(
            Figure(
                name: "HTTP perform echo + waitUntilDone, tracing on", value: "\(fmt(median(aAll) / 1000, 1))k req/s",
                baseline: "\(fmt(median(bAll) / 1000, 1))k req/s (--no-trace)", ratio: fmt(hopRatio, 3) + "×",
                goal: "≥ 0.95× off", pass: hopRatio >= 0.95, steal: hopSteals.max() ?? 0, clean: hopClean))
        section.details =
            "\(roundTrips) in-process round trips per side and round (two workers, Worker.perform echo + reply), then wrk -t1 -c16 "
            + "for \(seconds) s per server and round against two runloopd processes (--log-level error, one with --no-trace); "
            + "\(rounds) rounds, sides alternating; ratio = median of per-round ratios.\n\n" + rows
        section.emit(started: started, outputDirectory: out)
    }
}
