import Foundation
import RunLoopTestSupport

/// The HTTP hop: runloopd (request posted to the control loop's
/// CommandSource, connection suspended, answered from the loop, resumed)
/// against a bare libmicrohttpd hello-world in C answering inside its access
/// handler, same daemon flags, same body size. `wrk -t1 -c16`, alternating
/// A B rounds, median of the per-round requests/s ratios.
///
/// Second baselines, in the same rounds (A B C): `bare-mhd/minimal-hop.c`,
/// the same suspend → locked array → plain version-0 CFRunLoopSource (signal +
/// wake-up) → queue + resume written in C, with one loop (for GET) or two
/// (control loop → second loop, for perform + waitUntilDone). Then runloopd
/// with its default flags (access log on, to a file) against
/// `--log-level error`, and `wrk -t1 -c1` p50 latency against the minimal hop.
enum HopBenchmark {
    /// The perform every HTTP benchmark sends: echo, waiting for the result.
    static let performBody = #"{"selector":"echo","args":{"n":1},"waitUntilDone":true}"#

    /// A wrk script that POSTs `performBody` (written once per name).
    static func performScript(_ name: String) -> String {
        let path = NSTemporaryDirectory() + "rlbench-\(name)-perform.lua"
        try? """
        wrk.method = "POST"
        wrk.body = '\(performBody)'
        wrk.headers["Content-Type"] = "application/json"

        """.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// A runloopd (`--log-level error` plus `extra`) with one default thread
    /// named `thread`: the server and its perform path.
    static func serverWithThread(
        runloopd: String, publicDir: String, thread: String, extra: [String]
    ) -> (ServerProcess, String) {
        let server = startRunloopd(runloopd, publicDir: publicDir, extra)
        do {
            let client = try TestHTTPConnection(port: server.port)
            let created = try client.json("POST", "/api/threads", body: #"{"name":"\#(thread)"}"#)
            guard let id = threadIdentifier(created.text) else { fatalError("no thread") }
            return (server, "/api/threads/\(id)/perform")
        } catch { fatalError("\(error)") }
    }

    /// Two servers under the same wrk load, `rounds` times, sides alternating
    /// (A B, then B A); after a 2 s warm-up of each. Per round: req/s of each,
    /// the ratio A/B, the steal; a Markdown table of the rounds.
    static func alternate(
        _ label: String, a: (port: UInt16, path: String), b: (port: UInt16, path: String), rounds: Int, seconds: Int,
        script: String?, columns: (String, String), extra: (title: String, value: () -> String)? = nil
    ) -> (a: [Double], b: [Double], ratios: [Double], steals: [Double], clean: Bool, rows: String) {
        _ = wrk(port: a.port, path: a.path, seconds: 2, script: script)
        _ = wrk(port: b.port, path: b.path, seconds: 2, script: script)
        var (aAll, bAll, ratios, steals, clean) = ([Double](), [Double](), [Double](), [Double](), true)
        var rows =
            "| round | \(columns.0) | \(columns.1) | ratio | steal |\(extra.map { " \($0.title) |" } ?? "")\n"
            + "|---|---|---|---|---|"
            + String(repeating: "---|", count: extra?.title.split(separator: "|").count ?? 0) + "\n"
        for round in 1...rounds {
            let result = measureClean("\(label) round \(round)") { () -> (Double, Double) in
                let runA = { wrk(port: a.port, path: a.path, seconds: seconds, script: script).rps }
                let runB = { wrk(port: b.port, path: b.path, seconds: seconds, script: script).rps }
                if round % 2 == 1 {
                    let first = runA()
                    return (first, runB())
                }
                let first = runB()
                return (runA(), first)
            }
            let (x, y) = result.value
            aAll.append(x)
            bAll.append(y)
            ratios.append(x / y)
            steals.append(result.steal)
            clean = clean && result.clean
            rows +=
                "| \(round) | \(fmt(x, 0)) | \(fmt(y, 0)) | \(fmt(x / y, 3)) | \(fmt(result.steal, 1)) %\(result.clean ? "" : " (contaminated)") |"
                + (extra.map { " \($0.value()) |" } ?? "") + "\n"
        }
        return (aAll, bAll, ratios, steals, clean, rows)
    }

    /// What a case compares: requests/s (higher is better, PASS when the ratio
    /// is ≥ the goal) or wrk's p50 latency (lower is better, PASS when ≤).
    enum Metric {
        case throughput
        case p50
    }

    /// One baseline of a case: measured in the same rounds, right after the candidate.
    struct Baseline {
        var port: UInt16
        var goal: Double
        var baselineName: String
        /// The figure's name; the case's when nil.
        var figureName: String?
        /// Whom the goal names ("bare", "minimal hop"...).
        var goalOf = "bare"
    }

    struct Case {
        var name: String
        var path: String
        var script: String?
        var candidatePort: UInt16
        var baselines: [Baseline]
        var metric = Metric.throughput
        var connections = 16
        var rounds: Int
        var seconds: Int
    }

    static func run(
        runloopd: String, hello: String, minimalHop: String, publicDir: String, rounds: Int, seconds: Int, out: String
    ) {
        let started = nowMono()
        var section = Section(
            id: "hop", title: "HTTP hop: runloopd vs bare libmicrohttpd and a minimal CF hop (wrk -t1)",
            command: "rlbench hop")
        let scriptPath = performScript("hop")
        let performBody = Self.performBody

        var servers: [ServerProcess] = []
        defer { for server in servers { server.stop(signal: SIGINT, grace: 8) } }
        func start(_ launch: () throws -> ServerProcess) -> ServerProcess {
            do {
                let server = try launch()
                servers.append(server)
                return server
            } catch { fatalError("\(error)") }
        }
        // --no-store: these rows measure the hop against baselines that keep nothing;
        // what the history store costs is `rlbench store`'s own row (store on vs off).
        func startRunLoopd(httpThreads: Int) -> ServerProcess {
            start { startRunloopd(runloopd, publicDir: publicDir, ["--http-threads", "\(httpThreads)", "--no-store"]) }
        }
        // The bare baselines both take `PORT N BODY_BYTES` (N: hello's threads, minimal-hop's hops).
        func startBare(_ executable: String, _ n: Int, bodyBytes: Int) -> ServerProcess {
            let port = freeLoopbackPort()
            return start {
                try .listening(
                    executable: URL(fileURLWithPath: executable), arguments: ["\(port)", "\(n)", "\(bodyBytes)"],
                    port: port)
            }
        }
        func startHello(threads: Int, bodyBytes: Int) -> ServerProcess {
            startBare(hello, threads, bodyBytes: bodyBytes)
        }
        func startMinimalHop(hops: Int, bodyBytes: Int) -> ServerProcess {
            startBare(minimalHop, hops, bodyBytes: bodyBytes)
        }
        // runloopd with its default flags logs every request (info) to stderr:
        // through a pipe into this process that would cost rlbench CPU on the
        // same 2 cores, so a wrapper sends it to a file (the sh execs runloopd:
        // same pid, signals go straight to it).
        let defaultLog = NSTemporaryDirectory() + "rlbench-runloopd-default-\(getpid()).log"
        let wrapperPath = NSTemporaryDirectory() + "rlbench-runloopd-default-\(getpid()).sh"
        defer {
            try? FileManager.default.removeItem(atPath: defaultLog)
            try? FileManager.default.removeItem(atPath: wrapperPath)
        }
        func startRunLoopdDefaultFlags() -> ServerProcess {
            let wrapper = "#!/bin/sh\nexec '\(runloopd)' \"$@\" 2>'\(defaultLog)'\n"
            do {
                try wrapper.write(toFile: wrapperPath, atomically: true, encoding: .utf8)
                try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: wrapperPath)
            } catch { fatalError("cannot write \(wrapperPath): \(error)") }
            return start {
                do {
                    return try .runloopd(
                        binary: URL(fileURLWithPath: wrapperPath),
                        arguments: ["--http-threads", "1", "--public-dir", publicDir])
                } catch {
                    let log = (try? String(contentsOfFile: defaultLog, encoding: .utf8)) ?? ""
                    throw TestHTTPError("\(error); its stderr: \(log.suffix(2000))")
                }
            }
        }
        let rl1 = startRunLoopd(httpThreads: 1)

        // Sizes of the answers the baseline must match.
        let p1 = rl1.port
        guard let client = try? TestHTTPConnection(port: p1),
            let version = try? client.json("GET", "/api/version"),
            let created = try? client.json("POST", "/api/threads", body: #"{"name":"bench-hop"}"#),
            let threadId = threadIdentifier(created.text),
            let echo = try? client.json("POST", "/api/threads/\(threadId)/perform", body: performBody)
        else { fatalError("runloopd did not answer the setup requests") }
        guard version.status == 200, echo.status == 200 else {
            fatalError("setup answers: version \(version.status), perform \(echo.status) \(echo.text)")
        }
        let rl2 = startRunLoopd(httpThreads: 2)
        let h1 = startHello(threads: 1, bodyBytes: version.body.count)
        let h1p = startHello(threads: 1, bodyBytes: echo.body.count)
        let h2 = startHello(threads: 2, bodyBytes: version.body.count)
        let m1 = startMinimalHop(hops: 1, bodyBytes: version.body.count)
        let m2p = startMinimalHop(hops: 2, bodyBytes: echo.body.count)
        let rlDefault = startRunLoopdDefaultFlags()

        // The new rows are shorter (2 s per server instead of 3) to keep the whole run near 3 minutes.
        let shortSeconds = max(1, seconds * 2 / 3)
        let cases = [
            Case(
                name: "GET /api/version (1 HTTP thread)", path: "/api/version", script: nil, candidatePort: p1,
                baselines: [
                    Baseline(port: h1.port, goal: 0.8, baselineName: "bare MHD, epoll thread"),
                    Baseline(
                        port: m1.port, goal: 0.9, baselineName: "minimal hop: MHD → one plain CF source0 loop → resume",
                        figureName: "GET /api/version (1 HTTP thread) vs minimal CF hop", goalOf: "minimal hop"),
                ], rounds: rounds, seconds: seconds),
            Case(
                name: "POST /api/threads/{id}/perform echo, waitUntilDone (two hops)",
                path: "/api/threads/\(threadId)/perform", script: scriptPath, candidatePort: p1,
                baselines: [
                    Baseline(port: h1p.port, goal: 0.5, baselineName: "bare MHD, same POST"),
                    Baseline(
                        port: m2p.port, goal: 0.8,
                        baselineName: "two-hop: MHD → CF loop A → CF loop B → resume, same POST",
                        figureName: "POST perform echo, waitUntilDone vs two-hop CF baseline", goalOf: "two-hop"),
                ], rounds: rounds, seconds: seconds),
            Case(
                name: "GET /api/version (--http-threads 2)", path: "/api/version", script: nil,
                candidatePort: rl2.port,
                baselines: [Baseline(port: h2.port, goal: 0.8, baselineName: "bare MHD, pool of 2")],
                rounds: rounds, seconds: seconds),
            Case(
                name: "GET /api/version, default flags (access log on)", path: "/api/version", script: nil,
                candidatePort: rlDefault.port,
                baselines: [
                    Baseline(
                        port: p1, goal: 0.9, baselineName: "runloopd --log-level error",
                        goalOf: "--log-level error (within 10 %)")
                ], rounds: rounds, seconds: shortSeconds),
            Case(
                name: "GET /api/version p50 latency, wrk -c1", path: "/api/version", script: nil, candidatePort: p1,
                baselines: [
                    Baseline(
                        port: m1.port, goal: 1.15, baselineName: "minimal hop, wrk -c1", goalOf: "minimal hop")
                ], metric: .p50, connections: 1, rounds: rounds, seconds: shortSeconds),
        ]
        var charts: [String] = []
        var table =
            "| case | round | runloopd req/s | p50 / p99 | baseline req/s | p50 / p99 | ratio | steal |\n|---|---|---|---|---|---|---|---|\n"
        for item in cases {
            log("hop: \(item.name)")
            func measure(_ port: UInt16, _ seconds: Int) -> WrkResult {
                wrk(port: port, path: item.path, seconds: seconds, script: item.script, connections: item.connections)
            }
            // Warm-up, unreported.
            _ = measure(item.candidatePort, 2)
            for baseline in item.baselines { _ = measure(baseline.port, 2) }
            func ratioOf(_ a: WrkResult, _ b: WrkResult) -> Double {
                switch item.metric {
                case .throughput: return a.rps / b.rps
                case .p50: return a.p50 / b.p50
                }
            }
            var ratios: [[Double]] = Array(repeating: [], count: item.baselines.count)
            var candidates: [WrkResult] = []
            var baselines: [[WrkResult]] = Array(repeating: [], count: item.baselines.count)
            var steals: [Double] = []
            var clean = true
            for round in 1...item.rounds {
                let result = measureClean("round \(round)") { () -> (WrkResult, [WrkResult]) in
                    // A B (C) in one round; the next round starts with A again (A B A B).
                    let a = measure(item.candidatePort, item.seconds)
                    let bs = item.baselines.map { measure($0.port, item.seconds) }
                    return (a, bs)
                }
                let (a, bs) = result.value
                steals.append(result.steal)
                clean = clean && result.clean
                candidates.append(a)
                for (index, b) in bs.enumerated() {
                    let ratio = ratioOf(a, b)
                    ratios[index].append(ratio)
                    baselines[index].append(b)
                    let errors = a.errors + b.errors > 0 ? " (errors: \(a.errors)/\(b.errors))" : ""
                    let name = item.baselines[index].figureName ?? item.name
                    table +=
                        "| \(name) | \(round) | \(fmt(a.rps, 0)) | \(fmtDuration(a.p50)) / \(fmtDuration(a.p99)) | \(fmt(b.rps, 0)) | \(fmtDuration(b.p50)) / \(fmtDuration(b.p99)) | \(fmt(ratio, 2))\(item.metric == .p50 ? " (p50)" : "")\(errors) | \(fmt(result.steal, 1)) %\(result.clean ? "" : " (contaminated)") |\n"
                }
            }
            // The latency distribution (wrk's percentiles, medians over the rounds)
            // as a picture: runloopd against every baseline of the case.
            func distribution(_ name: String, _ results: [WrkResult]) -> SVGChart.Series {
                let points: [(x: Double, y: Double)] = [
                    (50, median(results.map(\.p50)) * 1e6), (75, median(results.map(\.p75)) * 1e6),
                    (90, median(results.map(\.p90)) * 1e6), (99, median(results.map(\.p99)) * 1e6),
                ]
                return SVGChart.Series(name: name, points: points)
            }
            let slug = item.name.lowercased().map { $0.isLetter || $0.isNumber ? $0 : "-" }
                .reduce(into: "") { out, c in if !(c == "-" && out.hasSuffix("-")) { out.append(c) } }
            let chartPath = "benchmarks/charts/hop-\(slug.trimmingCharacters(in: CharacterSet(charactersIn: "-"))).svg"
            SVGChart.write(
                SVGChart.line(
                    title: "Latency, \(item.name) (wrk -t1 -c\(item.connections))", xLabel: "percentile",
                    yLabel: "latency, µs",
                    series: [distribution("runloopd", candidates)]
                        + item.baselines.enumerated().map { index, b in
                            distribution(
                                b.baselineName.split(whereSeparator: { $0 == "(" || $0 == ":" }).first.map {
                                    $0.trimmingCharacters(in: .whitespaces)
                                } ?? "baseline", baselines[index])
                        }, xTicks: [50, 75, 90, 99]), to: chartPath)
            charts.append("![\(item.name)](\(chartPath))")
            let aRps = median(candidates.map(\.rps))
            let aP50 = median(candidates.map(\.p50))
            let aP99 = median(candidates.map(\.p99))
            let errors = candidates.map(\.errors).reduce(0, +)
            for (index, baseline) in item.baselines.enumerated() {
                let ratio = median(ratios[index])
                let bRps = median(baselines[index].map(\.rps))
                let bP50 = median(baselines[index].map(\.p50))
                let bP99 = median(baselines[index].map(\.p99))
                let baselineErrors = baselines[index].map(\.errors).reduce(0, +)
                let goal: String
                let pass: Bool
                switch item.metric {
                case .throughput:
                    goal = "≥ \(baseline.goal)× \(baseline.goalOf)"
                    pass = ratio >= baseline.goal
                case .p50:
                    goal = "p50 ≤ \(baseline.goal)× \(baseline.goalOf)"
                    pass = ratio <= baseline.goal
                }
                section.figures.append(
                    Figure(
                        name: baseline.figureName ?? item.name,
                        value:
                            "\(fmt(aRps / 1000, 1))k req/s, p50 \(fmtDuration(aP50)), p99 \(fmtDuration(aP99))\(errors > 0 ? ", \(errors) errors" : "")",
                        baseline:
                            "\(fmt(bRps / 1000, 1))k req/s, p50 \(fmtDuration(bP50)), p99 \(fmtDuration(bP99))\(baselineErrors > 0 ? ", \(baselineErrors) errors" : "") (\(baseline.baselineName))",
                        ratio: fmt(ratio, 2) + "×", goal: goal,
                        pass: pass && errors == 0 && baselineErrors == 0,
                        steal: steals.max() ?? 0, clean: clean))
            }
        }
        section.details =
            "\(rounds) rounds per case, A (runloopd) then each baseline (B, C) in turn, after 2 s of unreported warm-up each; "
            + "\(seconds) s per server in the first three cases, \(shortSeconds) s in the last two. "
            + "The figure is the median of the per-round ratios (req/s; for the wrk -c1 case p50 latency, lower is better), "
            + "latencies the medians of wrk's per-round p50 / p99. "
            + "Baselines: bare MHD (`bare-mhd/hello.c`) answers inside its access handler; the minimal hop "
            + "(`bare-mhd/minimal-hop.c`) suspends, appends to a locked array, signals a plain version-0 CFRunLoopSource and "
            + "wakes its loop, whose perform queues the answer and resumes (HOPS 2: loop A hands over the same way to loop B, "
            + "which answers); same daemon flags as runloopd, bodies padded to runloopd's answer sizes. "
            + "runloopd runs with `--log-level error --no-store` (the hop alone: the history store's cost is `rlbench store`'s "
            + "row). The default-flags case runs a second runloopd with no flags at all (access log to a file, the store on; "
            + "GETs are not stored) against the first. wrk -t1 runs on the same 2 vCPUs as the server.\n\n" + table
            + "\nLatency distributions (wrk's 50/75/90/99th percentiles, medians over the rounds):\n\n"
            + charts.joined(separator: "\n") + "\n"
        section.notes.append(
            "Reference (docs/benchmarking.md): bare libmicrohttpd `GET /ping`, wrk -t1 -c16: 124.6k req/s, p50 115 µs, p99 237 µs; Hummingbird 2.28: 0.21× bare."
        )
        section.emit(started: started, outputDirectory: out)
    }

    static func threadIdentifier(_ json: String) -> String? {
        guard let data = json.data(using: .utf8),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { return nil }
        if let id = object["id"] as? String { return id }
        if let thread = object["thread"] as? [String: Any], let id = thread["id"] as? String { return id }
        return nil
    }
}
