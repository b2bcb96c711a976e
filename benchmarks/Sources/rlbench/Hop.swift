import Foundation
import RunLoopTestSupport

/// The HTTP hop: runloopd (request posted to the control loop's
/// CommandSource, connection suspended, answered from the loop, resumed)
/// against a bare libmicrohttpd hello-world in C answering inside its access
/// handler, same daemon flags, same body size. `wrk -t1 -c16`, alternating
/// A B rounds, median of the per-round requests/s ratios.
enum HopBenchmark {
    struct WrkResult {
        var rps: Double
        var p50: Double
        var p99: Double
        var errors: Int
        var requests: Int
    }

    static func wrk(port: UInt16, path: String, seconds: Int, script: String?) -> WrkResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/wrk")
        var args = ["-t1", "-c16", "-d\(seconds)s", "--latency"]
        if let script { args += ["-s", script] }
        args.append("http://127.0.0.1:\(port)\(path)")
        process.arguments = args
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { fatalError("cannot run wrk: \(error)") }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return parse(String(decoding: data, as: UTF8.self))
    }

    static func parse(_ text: String) -> WrkResult {
        var result = WrkResult(rps: .nan, p50: .nan, p99: .nan, errors: 0, requests: 0)
        for raw in text.split(separator: "\n") {
            let line = raw.trimmingCharacters(in: .whitespaces)
            let parts = line.split(separator: " ", omittingEmptySubsequences: true)
            if line.hasPrefix("Requests/sec:"), parts.count > 1 { result.rps = Double(parts[1]) ?? .nan }
            if line.hasPrefix("50%"), parts.count > 1 { result.p50 = seconds(String(parts[1])) }
            if line.hasPrefix("99%"), parts.count > 1 { result.p99 = seconds(String(parts[1])) }
            if line.hasPrefix("Non-2xx"), let last = parts.last { result.errors += Int(last) ?? 0 }
            if line.hasPrefix("Socket errors") { result.errors += 1 }
            if line.contains("requests in"), let first = parts.first { result.requests = Int(first) ?? 0 }
        }
        return result
    }

    static func seconds(_ text: String) -> Double {
        let units: [(String, Double)] = [("us", 1e-6), ("ms", 1e-3), ("s", 1), ("m", 60)]
        for (suffix, scale) in units where text.hasSuffix(suffix) {
            return (Double(text.dropLast(suffix.count)) ?? .nan) * scale
        }
        return .nan
    }

    struct Case {
        var name: String
        var path: String
        var script: String?
        var candidatePort: UInt16
        var baselinePort: UInt16
        var goal: Double
        var baselineName: String
    }

    static func run(runloopd: String, hello: String, publicDir: String, rounds: Int, seconds: Int, out: String) {
        let started = nowMono()
        var section = Section(
            id: "hop", title: "HTTP hop: runloopd vs bare libmicrohttpd (wrk -t1 -c16)", command: "rlbench hop")
        let scriptPath = NSTemporaryDirectory() + "rlbench-perform.lua"
        let performBody = #"{"selector":"echo","args":{"n":1},"waitUntilDone":true}"#
        let lua = """
            wrk.method = "POST"
            wrk.body = '\(performBody)'
            wrk.headers["Content-Type"] = "application/json"

            """
        try? lua.write(toFile: scriptPath, atomically: true, encoding: .utf8)

        var servers: [ServerProcess] = []
        defer { for server in servers { server.stop(signal: SIGINT, grace: 8) } }
        func start(_ launch: () throws -> ServerProcess) -> ServerProcess {
            do {
                let server = try launch()
                servers.append(server)
                return server
            } catch { fatalError("\(error)") }
        }
        func startRunLoopd(httpThreads: Int) -> ServerProcess {
            start {
                try .runloopd(
                    binary: URL(fileURLWithPath: runloopd),
                    arguments: ["--http-threads", "\(httpThreads)", "--public-dir", publicDir, "--log-level", "error"])
            }
        }
        func startHello(threads: Int, bodyBytes: Int) -> ServerProcess {
            let port = freeLoopbackPort()
            return start {
                try .listening(
                    executable: URL(fileURLWithPath: hello), arguments: ["\(port)", "\(threads)", "\(bodyBytes)"],
                    port: port)
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

        let cases = [
            Case(
                name: "GET /api/version (1 HTTP thread)", path: "/api/version", script: nil, candidatePort: p1,
                baselinePort: h1.port, goal: 0.8, baselineName: "bare MHD, epoll thread"),
            Case(
                name: "POST /api/threads/{id}/perform echo, waitUntilDone (two hops)",
                path: "/api/threads/\(threadId)/perform", script: scriptPath, candidatePort: p1,
                baselinePort: h1p.port, goal: 0.5, baselineName: "bare MHD, same POST"),
            Case(
                name: "GET /api/version (--http-threads 2)", path: "/api/version", script: nil,
                candidatePort: rl2.port, baselinePort: h2.port, goal: 0.8, baselineName: "bare MHD, pool of 2"),
        ]
        var table =
            "| case | round | runloopd req/s | p50 / p99 | bare MHD req/s | p50 / p99 | ratio | steal |\n|---|---|---|---|---|---|---|---|\n"
        for item in cases {
            log("hop: \(item.name)")
            // Warm-up, unreported.
            _ = wrk(port: item.candidatePort, path: item.path, seconds: 2, script: item.script)
            _ = wrk(port: item.baselinePort, path: item.path, seconds: 2, script: item.script)
            var ratios: [Double] = []
            var candidates: [WrkResult] = []
            var baselines: [WrkResult] = []
            var steals: [Double] = []
            var clean = true
            for round in 1...rounds {
                let result = measureClean("round \(round)") { () -> (WrkResult, WrkResult) in
                    // A B in one round; the next round starts with A again (A B A B).
                    let a = wrk(port: item.candidatePort, path: item.path, seconds: seconds, script: item.script)
                    let b = wrk(port: item.baselinePort, path: item.path, seconds: seconds, script: item.script)
                    return (a, b)
                }
                let (a, b) = result.value
                steals.append(result.steal)
                clean = clean && result.clean
                ratios.append(a.rps / b.rps)
                candidates.append(a)
                baselines.append(b)
                let errors = a.errors + b.errors > 0 ? " (errors: \(a.errors)/\(b.errors))" : ""
                table +=
                    "| \(item.name) | \(round) | \(fmt(a.rps, 0)) | \(fmtDuration(a.p50)) / \(fmtDuration(a.p99)) | \(fmt(b.rps, 0)) | \(fmtDuration(b.p50)) / \(fmtDuration(b.p99)) | \(fmt(a.rps / b.rps, 2))\(errors) | \(fmt(result.steal, 1)) %\(result.clean ? "" : " (contaminated)") |\n"
            }
            let ratio = median(ratios)
            let aRps = median(candidates.map(\.rps))
            let bRps = median(baselines.map(\.rps))
            let aP50 = median(candidates.map(\.p50))
            let aP99 = median(candidates.map(\.p99))
            let bP50 = median(baselines.map(\.p50))
            let bP99 = median(baselines.map(\.p99))
            let errors = candidates.map(\.errors).reduce(0, +)
            section.figures.append(
                Figure(
                    name: item.name,
                    value:
                        "\(fmt(aRps / 1000, 1))k req/s, p50 \(fmtDuration(aP50)), p99 \(fmtDuration(aP99))\(errors > 0 ? ", \(errors) errors" : "")",
                    baseline: "\(fmt(bRps / 1000, 1))k req/s, p50 \(fmtDuration(bP50)), p99 \(fmtDuration(bP99)) (\(item.baselineName))",
                    ratio: fmt(ratio, 2) + "×", goal: "≥ \(item.goal)× bare", pass: ratio >= item.goal && errors == 0,
                    steal: steals.max() ?? 0, clean: clean))
        }
        section.details =
            "\(rounds) rounds of \(seconds) s per server and case, A (runloopd) then B (bare MHD), after 2 s of unreported warm-up each; "
            + "the figure is the median of the per-round ratios, latencies the medians of wrk's per-round p50 / p99. "
            + "wrk -t1 runs on the same 2 vCPUs as the server.\n\n" + table
        section.notes.append(
            "Reference (docs/benchmarking.md): bare libmicrohttpd `GET /ping`, wrk -t1 -c16: 124.6k req/s, p50 115 µs, p99 237 µs; Hummingbird 2.28: 0.21× bare.")
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
