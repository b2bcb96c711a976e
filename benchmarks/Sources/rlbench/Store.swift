import Foundation
import RunLoopTestSupport

/// What the history store costs the request path (issue 15): perform echo +
/// waitUntilDone through runloopd with its default SQLite store vs
/// `--no-store`, alternating in one run (goal: the store costs at most 10 %),
/// and the store's write rate under that load (events committed per second,
/// none dropped).
///
/// `--store URL` gives the stored side another store (a PostgreSQL URL).
/// `--versus PATH` (issue 27) replaces the `--no-store` side by another
/// runloopd binary with a store too (`--versus-store URL`, default the same
/// `--store`; give it a database of its own): the same load on two builds,
/// e.g. before and after a change of the store's client, in one run.
enum StoreBenchmark {
    static func run(
        runloopd: String, publicDir: String, rounds: Int, seconds: Int, out: String, store: String? = nil,
        versus: String? = nil, versusStore: String? = nil, flags: [String] = []
    ) {
        let started = nowMono()
        let kind = store.map { $0.hasPrefix("postgres") ? "PostgreSQL" : $0 } ?? "SQLite"
        let against = versus.map { "\(kind) store, \($0)" } ?? "--no-store"
        var section = Section(
            id: versus == nil && store == nil && flags.isEmpty
                ? "store" : "store-\(versus == nil ? (flags.isEmpty ? "on" : "flags") : "versus")",
            title: "The history store's cost: \(kind) store on vs \(against)",
            command: "rlbench store" + (store == nil ? "" : " --store URL") + (versus == nil ? "" : " --versus PATH")
                + (flags.isEmpty ? "" : " --store-flags \"\(flags.joined(separator: " "))\""))
        let scriptPath = HopBenchmark.performScript("store")
        // ServerProcess gives each server its own XDG_STATE_HOME: the store is a fresh file.
        func launch(_ binary: String, _ extra: [String]) -> (ServerProcess, String) {
            HopBenchmark.serverWithThread(runloopd: binary, publicDir: publicDir, thread: "bench-store", extra: extra)
        }
        let (stored, storedPath) = launch(runloopd, (store.map { ["--store", $0] } ?? []) + flags)
        let (other, otherPath) =
            versus.map { launch($0, (versusStore ?? store).map { ["--store", $0] } ?? []) }
            ?? launch(runloopd, ["--no-store"])
        defer {
            stored.stop(signal: SIGINT, grace: 8)
            other.stop(signal: SIGINT, grace: 8)
        }
        func storeStatus(_ server: ServerProcess) -> (written: Double, dropped: Double) {
            let client = try? TestHTTPConnection(port: server.port)
            let text = (try? client?.json("GET", "/api/store"))?.text ?? "{}"
            let object = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] ?? [:]
            return ((object["written"] as? Double) ?? 0, (object["dropped"] as? Double) ?? 0)
        }
        let before = (storeStatus(stored), storeStatus(other))
        let loadStarted = nowMono()
        // Each round's drops (the stored side, and the versus side's) and the
        // machine's load average when it ended: a shared machine starves a writer.
        var lastDropped = (before.0.dropped, before.1.dropped)
        let perRound: () -> String = {
            let now = (storeStatus(stored).dropped, storeStatus(other).dropped)
            defer { lastDropped = now }
            let load = Environment.current().loadAverage.split(separator: " ").first.map(String.init) ?? "?"
            let dropped = "\(Int(now.0 - lastDropped.0))" + (versus == nil ? "" : " / \(Int(now.1 - lastDropped.1))")
            return "\(dropped) | \(load)"
        }
        let duel = HopBenchmark.alternate(
            "store hop", a: (stored.port, storedPath), b: (other.port, otherPath), rounds: rounds, seconds: seconds,
            script: scriptPath, columns: ("store on req/s", versus == nil ? "--no-store req/s" : "versus req/s"),
            extra: (versus == nil ? "dropped | load (1 min)" : "dropped (A / B) | load (1 min)", perRound))
        let after = (storeStatus(stored), storeStatus(other))
        let storedSeconds = Double(rounds * seconds + 2)
        let ratio = median(duel.ratios)
        section.figures.append(
            Figure(
                name: "HTTP perform echo + waitUntilDone, \(kind) store on",
                value: "\(fmt(median(duel.a) / 1000, 1))k req/s",
                baseline: "\(fmt(median(duel.b) / 1000, 1))k req/s (\(against))", ratio: fmt(ratio, 3) + "×",
                goal: versus == nil ? "≥ 0.90× off" : "≥ 0.95× (no worse, within noise)",
                pass: ratio >= (versus == nil ? 0.9 : 0.95), steal: duel.steals.max() ?? 0, clean: duel.clean))
        /// One server's commit rate against what its load offered (a perform and its request each).
        func writeRate(_ name: String, written: Double, dropped: Double, requests: [Double], offered: String)
            -> Figure
        {
            Figure(
                name: name, value: "\(fmt(written / storedSeconds / 1000, 1))k events/s",
                baseline: "\(fmt(median(requests) * 2 / 1000, 1))k events/s \(offered)",
                ratio: "dropped \(Int(dropped))", goal: "none dropped", pass: dropped == 0,
                steal: duel.steals.max() ?? 0, clean: duel.clean)
        }
        section.figures.append(
            writeRate(
                "store write rate under that load (events committed)", written: after.0.written - before.0.written,
                dropped: after.0.dropped - before.0.dropped, requests: duel.a,
                offered: "offered (a perform and its request each)"))
        if versus != nil {
            section.figures.append(
                writeRate(
                    "versus: its write rate under the same load", written: after.1.written - before.1.written,
                    dropped: after.1.dropped - before.1.dropped, requests: duel.b, offered: "offered"))
        }
        section.details =
            "wrk -t1 -c16 for \(seconds) s per server and round against two runloopd processes (--log-level error; "
            + "A: \(runloopd) with its \(kind) store\(store == nil ? " in a fresh folder" : ""), B: "
            + (versus.map { "\($0) with its \(kind) store (a database of its own)" } ?? "the same with --no-store")
            + "); \(rounds) rounds, sides alternating; ratio = median of per-round ratios (A/B). Write rate: events "
            + "the store committed while the server was under load (its warm-up and rounds, "
            + "\(fmt(nowMono() - loadStarted, 0)) s in all with the other side's turns), divided by its own load "
            + "time.\n\n" + duel.rows
        section.emit(started: started, outputDirectory: out)
    }
}
