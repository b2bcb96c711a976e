import Foundation
import RunLoopTestSupport

/// What the history store costs the request path (issue 15): perform echo +
/// waitUntilDone through runloopd with its default SQLite store vs
/// `--no-store`, alternating in one run (goal: the store costs at most 10 %),
/// and the store's write rate under that load (events committed per second,
/// none dropped).
enum StoreBenchmark {
    static func run(runloopd: String, publicDir: String, rounds: Int, seconds: Int, out: String) {
        let started = nowMono()
        var section = Section(
            id: "store", title: "The history store's cost: SQLite store on (default) vs --no-store",
            command: "rlbench store")
        let scriptPath = HopBenchmark.performScript("store")
        // ServerProcess gives each server its own XDG_STATE_HOME: the store is a fresh file.
        func launch(_ extra: [String]) -> (ServerProcess, String) {
            HopBenchmark.serverWithThread(runloopd: runloopd, publicDir: publicDir, thread: "bench-store", extra: extra)
        }
        let (stored, storedPath) = launch([])
        let (plain, plainPath) = launch(["--no-store"])
        defer {
            stored.stop(signal: SIGINT, grace: 8)
            plain.stop(signal: SIGINT, grace: 8)
        }
        func storeStatus() -> (written: Double, dropped: Double) {
            let client = try? TestHTTPConnection(port: stored.port)
            let text = (try? client?.json("GET", "/api/store"))?.text ?? "{}"
            let object = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] ?? [:]
            return ((object["written"] as? Double) ?? 0, (object["dropped"] as? Double) ?? 0)
        }
        let before = storeStatus()
        let loadStarted = nowMono()
        let duel = HopBenchmark.alternate(
            "store hop", a: (stored.port, storedPath), b: (plain.port, plainPath), rounds: rounds, seconds: seconds,
            script: scriptPath, columns: ("store on req/s", "--no-store req/s"))
        let after = storeStatus()
        let storedSeconds = Double(rounds * seconds + 2)
        let ratio = median(duel.ratios)
        section.figures.append(
            Figure(
                name: "HTTP perform echo + waitUntilDone, SQLite store on",
                value: "\(fmt(median(duel.a) / 1000, 1))k req/s",
                baseline: "\(fmt(median(duel.b) / 1000, 1))k req/s (--no-store)", ratio: fmt(ratio, 3) + "×",
                goal: "≥ 0.90× off", pass: ratio >= 0.9, steal: duel.steals.max() ?? 0, clean: duel.clean))
        let written = after.written - before.written
        section.figures.append(
            Figure(
                name: "store write rate under that load (events committed)",
                value: "\(fmt(written / storedSeconds / 1000, 1))k events/s",
                baseline: "\(fmt(median(duel.a) * 2 / 1000, 1))k events/s offered (a perform and its request each)",
                ratio: "dropped \(Int(after.dropped - before.dropped))", goal: "none dropped",
                pass: after.dropped == before.dropped, steal: duel.steals.max() ?? 0, clean: duel.clean))
        section.details =
            "wrk -t1 -c16 for \(seconds) s per server and round against two runloopd processes (--log-level error; one "
            + "with its default SQLite store in a fresh folder, one with --no-store); \(rounds) rounds, sides "
            + "alternating; ratio = median of per-round ratios. Write rate: events the store committed while the "
            + "store-on server was under load (its warm-up and rounds, \(fmt(nowMono() - loadStarted, 0)) s in all "
            + "with the other side's turns), divided by its own load time.\n\n" + duel.rows
        section.emit(started: started, outputDirectory: out)
    }
}
