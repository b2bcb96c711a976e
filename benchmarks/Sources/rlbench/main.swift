import Foundation

// rlbench: the benchmarks of issue 6. `benchmarks/run.sh` (make bench) runs
// every subcommand and then `report`; each prints its figures and saves them
// under --out for the report.
//
//   rlbench hop     --runloopd PATH --hello PATH --minimal-hop PATH [--rounds 5] [--seconds 3]
//   rlbench wakeup  [--round-trips 10000] [--rounds 5]
//   rlbench trace   --runloopd PATH [--round-trips 10000] [--rounds 5] [--seconds 3]
//   rlbench timers  [--timers 10000] [--workers 16] [--seconds 10]
//   rlbench idle    [--workers 64] [--seconds 10] [--rss-workers 1000]
//   rlbench scale   --runloopd PATH [--samples 1000] [--budget 150]
//   rlbench many    --runloopd PATH [--threads 1000] [--samples 200] [--seconds 10]
//   rlbench store   --runloopd PATH [--rounds 5] [--seconds 3] [--store URL] [--versus PATH [--versus-store URL]]
//                   [--store-flags "FLAGS"] (more runloopd flags for the store's side, e.g. "--store-queue 131072")
//   rlbench report  [--to BENCHMARKS.md] [--total SECONDS]

setvbuf(stdout, nil, _IOLBF, 0)
var arguments = Array(CommandLine.arguments.dropFirst())
let command = arguments.isEmpty ? "help" : arguments.removeFirst()
var options: [String: String] = [:]
var index = 0
while index < arguments.count {
    let key = arguments[index]
    if key.hasPrefix("--"), index + 1 < arguments.count {
        options[String(key.dropFirst(2))] = arguments[index + 1]
        index += 2
    } else {
        index += 1
    }
}
func option(_ name: String, _ fallback: String) -> String { options[name] ?? fallback }
func number(_ name: String, _ fallback: Double) -> Double { Double(options[name] ?? "") ?? fallback }
let out = option("out", "benchmarks/.build/results")
let publicDir = option("public-dir", "Public")

switch command {
case "hop":
    HopBenchmark.run(
        runloopd: option("runloopd", ".build/release/runloopd"), hello: option("hello", "benchmarks/.build/hello"),
        minimalHop: option("minimal-hop", "benchmarks/.build/minimal-hop"), publicDir: publicDir,
        rounds: Int(number("rounds", 5)), seconds: Int(number("seconds", 3)), out: out)
case "wakeup":
    WakeUpBenchmark.run(roundTrips: Int(number("round-trips", 10_000)), rounds: Int(number("rounds", 5)), out: out)
case "timers":
    TimerBenchmark.run(
        timers: Int(number("timers", 10_000)), workers: Int(number("workers", 16)), seconds: number("seconds", 10),
        out: out)
case "idle":
    IdleBenchmark.run(
        idleWorkers: Int(number("workers", 64)), seconds: number("seconds", 10),
        rssWorkers: Int(number("rss-workers", 1000)), out: out)
case "rss-plain":
    IdleBenchmark.plainRSSChild(threads: Int(arguments.first ?? "1000") ?? 1000)
case "scale":
    ScaleBenchmark.run(
        runloopd: option("runloopd", ".build/release/runloopd"), publicDir: publicDir,
        getSamples: Int(number("samples", 1000)), budget: number("budget", 150), out: out)
case "many":
    ManyBenchmark.run(
        runloopd: option("runloopd", ".build/release/runloopd"), publicDir: publicDir,
        threads: Int(number("threads", 1000)), samples: Int(number("samples", 200)), seconds: number("seconds", 10),
        out: out)
case "store":
    StoreBenchmark.run(
        runloopd: option("runloopd", ".build/release/runloopd"), publicDir: publicDir,
        rounds: Int(number("rounds", 5)), seconds: Int(number("seconds", 3)), out: out, store: options["store"],
        versus: options["versus"], versusStore: options["versus-store"],
        flags: options["store-flags"].map { $0.split(separator: " ").map(String.init) } ?? [])
case "trace":
    TraceBenchmark.run(
        runloopd: option("runloopd", ".build/release/runloopd"), publicDir: publicDir,
        roundTrips: Int(number("round-trips", 10_000)), rounds: Int(number("rounds", 5)),
        seconds: Int(number("seconds", 3)), out: out)
case "report":
    do {
        try ReportWriter.write(
            outputDirectory: out, to: option("to", "BENCHMARKS.md"), totalSeconds: options["total"].flatMap(Double.init)
        )
        print("wrote \(option("to", "BENCHMARKS.md"))")
    } catch {
        log("report: \(error)")
        exit(1)
    }
default:
    print("usage: rlbench hop|wakeup|trace|timers|idle|scale|many|store|report [--option value]...")
    exit(command == "help" ? 0 : 2)
}
exit(0)
