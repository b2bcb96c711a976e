import Foundation
import RunLoopTestSupport

/// A thousand threads (issue 26), through the real binary (default flags:
/// tracing and the store on, `--max-threads` raised): the paged list's
/// latency, what a `scope=summary` event stream costs the server and sends
/// while every thread runs a 100 ms timer, and the server's RSS per worker.
/// Each figure sits beside a baseline from the same run.
enum ManyBenchmark {
    /// Resident bytes of process `pid`.
    static func residentBytes(_ pid: Int32) -> Double {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
        else { return .nan }
        return (Double(line.split(separator: " ").dropFirst().first ?? "") ?? .nan) * 1024
    }

    static func run(runloopd: String, publicDir: String, threads: Int, samples: Int, seconds: Double, out: String) {
        let started = nowMono()
        raiseDescriptorLimit()
        var section = Section(
            id: "many", title: "A thousand threads: the paged list, the scoped stream, RSS per worker",
            command: "rlbench many")
        let server = startRunloopd(runloopd, publicDir: publicDir, ["--max-threads", "\(threads + 8)"])
        defer { server.stop(signal: SIGINT, grace: 8) }
        guard let client = try? TestHTTPConnection(port: server.port) else { fatalError("cannot connect") }
        let pid = server.pid

        func latency(_ path: String, _ count: Int) -> Percentiles {
            var values: [Double] = []
            for _ in 0..<count {
                let t0 = nowMono()
                guard let answer = try? client.json("GET", path), answer.status == 200 else {
                    fatalError("GET \(path) failed")
                }
                values.append(nowMono() - t0)
            }
            return Percentiles(values)
        }
        var ids: [String] = []
        func create(upTo count: Int) {
            while ids.count < count {
                guard let answer = try? client.json("POST", "/api/threads", body: "{}"), answer.status == 201,
                    let id = HopBenchmark.threadIdentifier(answer.text)
                else { fatalError("POST /api/threads failed at \(ids.count)") }
                ids.append(id)
            }
        }

        // 1. The list: a page of 100 at 100 threads (baseline), then at 1,000.
        usleep(300_000)
        let rssEmpty = residentBytes(pid)
        let steal = StealWindow()
        create(upTo: 100)
        let page100 = latency("/api/threads?limit=100", samples)
        create(upTo: threads)
        usleep(300_000)
        let rssIdle = residentBytes(pid)
        let page1000 = latency("/api/threads?limit=100", samples)
        let middle = latency("/api/threads?limit=100&cursor=\(ids[threads / 2])", samples)
        let whole = latency("/api/threads", max(5, samples / 20))
        log(
            "many: limit=100 p50 \(fmtDuration(page100.p50)) at 100 threads, \(fmtDuration(page1000.p50)) at \(threads); all \(fmtDuration(whole.p50))"
        )

        // 2. Every thread gets a 100 ms timer: 10 fires per thread per second.
        for id in ids {
            guard let answer = try? client.json("POST", "/api/threads/\(id)/timers", body: #"{"interval":0.1}"#),
                answer.status == 201
            else { fatalError("POST timers failed on \(id)") }
        }
        let timersStarted = nowMono()
        usleep(2_000_000)
        let busyPage = latency("/api/threads?limit=100", samples)

        // 3. The server's CPU with no stream, then with one summary stream, then one whole stream.
        func window(_ seconds: Double) -> (cpu: Double, wall: Double) {
            let (c0, t0) = (processCPUSeconds(pid), nowMono())
            usleep(useconds_t(seconds * 1e6))
            return (processCPUSeconds(pid) - c0, nowMono() - t0)
        }
        let quiet = window(seconds)
        func streamed(_ path: String, _ seconds: Double) -> (
            cpu: Double, wall: Double, bytes: Double, snapshots: Int, dropped: Bool
        ) {
            guard
                let stream = try? EventStreamClient<Int>(port: server.port, path: path, decode: { $0.utf8.count })
            else { fatalError("cannot open \(path)") }
            defer { stream.disconnect() }
            // From the first snapshot (or event) on: the connection's start is not measured.
            _ = stream.next(timeout: 10) { $0.name != "hello" }
            let (b0, n0) = stream.state.update { ($0.text.utf8.count, $0.events.count { $0.name == "snapshot" }) }
            let (c0, t0) = (processCPUSeconds(pid), nowMono())
            usleep(useconds_t(seconds * 1e6))
            let (c1, t1) = (processCPUSeconds(pid), nowMono())
            let (b1, n1) = stream.state.update { ($0.text.utf8.count, $0.events.count { $0.name == "snapshot" }) }
            let dropped = stream.state.update { $0.closed }
            return (c1 - c0, t1 - t0, Double(b1 - b0), n1 - n0, dropped)
        }
        let summary = streamed("/api/events?scope=summary", seconds)
        // A window without a stream on each side of the stream's: the
        // server's own CPU drifts while the turn rings fill (full after 26 s),
        // so the stream is compared with the mean of the two.
        let quietAfter = window(seconds)
        let inspecting = streamed("/api/events?scope=summary&inspect=\(ids[0]),\(ids[1])&types=turn,timer", seconds)
        let everything = streamed("/api/events", seconds / 2)
        usleep(1_000_000)
        let rssBusy = residentBytes(pid)
        let timersRan = nowMono() - timersStarted
        let stolen = steal.finish().steal
        let clean = stolen <= stealLimit

        let core = { (cpu: Double, wall: Double) in cpu / wall * 100 }
        let quietPercent = (core(quiet.cpu, quiet.wall) + core(quietAfter.cpu, quietAfter.wall)) / 2
        let summaryPercent = core(summary.cpu, summary.wall)
        let streamCost = summaryPercent - quietPercent
        let rate = summary.bytes / summary.wall
        let perWorkerIdle = (rssIdle - rssEmpty) / Double(threads) / 1024
        let perWorkerBusy = (rssBusy - rssEmpty) / Double(threads) / 1024

        section.figures.append(
            Figure(
                name: "GET /api/threads?limit=100 p50, \(threads) threads each with a 100 ms timer",
                value: fmtDuration(busyPage.p50),
                baseline:
                    "\(fmtDuration(page100.p50)) (100 idle threads); \(fmtDuration(page1000.p50)) (\(threads) idle)",
                ratio: fmt(busyPage.p50 / page100.p50, 2) + "×", goal: "≤ 5 ms", pass: busyPage.p50 <= 0.005,
                steal: stolen, clean: clean))
        section.figures.append(
            Figure(
                name: "server CPU of one scope=summary stream, \(threads) threads × 100 ms timer",
                value: "\(fmt(streamCost, 2)) % of a core (\(fmt(summaryPercent, 1)) % with it)",
                baseline: "\(fmt(quietPercent, 1)) % of a core (no stream)",
                ratio: fmt(summaryPercent / max(quietPercent, 0.001), 3) + "×", goal: "≤ 5 % of a core",
                pass: streamCost <= 5, steal: stolen, clean: clean))
        section.figures.append(
            Figure(
                name:
                    "bytes/s to one scope=summary stream (\(fmt(Double(summary.snapshots) / summary.wall, 1)) snapshots/s)",
                value: "\(fmt(rate / 1000, 1)) kB/s",
                baseline:
                    "\(fmt(everything.bytes / everything.wall / 1000, 1)) kB/s (the whole stream, no scope\(everything.dropped ? ": the server dropped the client as too slow" : ""); \(fmt(core(everything.cpu, everything.wall) - quietPercent, 1)) % of a core)",
                ratio: fmt(rate / max(everything.bytes / everything.wall, 1), 3) + "×",
                goal: "≤ --stream-max-bytes (1,000 kB/s)", pass: rate <= 1_000_000 * 1.05, steal: stolen, clean: clean))
        section.figures.append(
            Figure(
                name: "RSS per worker, tracing on, \(threads) workers with 100 ms timers (rings full)",
                value: "\(fmt(perWorkerBusy, 1)) KiB",
                baseline: "\(fmt(perWorkerIdle, 1)) KiB (same workers, idle, just made)",
                ratio: fmt(perWorkerBusy / max(perWorkerIdle, 0.001), 2) + "×", goal: "≤ 150 KiB",
                pass: perWorkerBusy <= 150, steal: stolen, clean: clean))
        section.details = """
            One runloopd (release, default flags: tracing and the SQLite store on, `--log-level error`, `--max-threads \(threads + 8)`), \(samples) sequential requests per latency on one keep-alive connection. Server CPU is its `/proc/<pid>/stat` user + system time over \(fmt(seconds, 0)) s windows (\(fmt(seconds / 2, 0)) s for the whole stream); the stream's cost is the window with the stream minus the mean of the windows without it just before and just after it (\(fmt(core(quiet.cpu, quiet.wall), 1)) % and \(fmt(core(quietAfter.cpu, quietAfter.wall), 1)) % here). Bytes are what the client read (SSE text, de-chunked), from its first snapshot on. RSS is `VmRSS` after the workers were made (idle) and after \(fmt(timersRan, 0)) s of 100 ms timers (each ring holds 256 turns: full after 26 s), minus the process before any worker, per worker.

            | measure | value |
            |---|---|
            | GET /api/threads?limit=100, 100 idle threads | p50 \(fmtDuration(page100.p50)), p99 \(fmtDuration(page100.p99)) |
            | same, \(threads) idle threads | p50 \(fmtDuration(page1000.p50)), p99 \(fmtDuration(page1000.p99)) |
            | same, a middle page (cursor) | p50 \(fmtDuration(middle.p50)), p99 \(fmtDuration(middle.p99)) |
            | same, \(threads) threads with 100 ms timers | p50 \(fmtDuration(busyPage.p50)), p99 \(fmtDuration(busyPage.p99)) |
            | GET /api/threads, all \(threads) (no limit) | p50 \(fmtDuration(whole.p50)), p99 \(fmtDuration(whole.p99)) |
            | server CPU, no stream | \(fmt(quietPercent, 1)) % of a core |
            | server CPU, one summary stream | \(fmt(summaryPercent, 1)) % (\(fmt(summary.bytes / summary.wall / 1000, 1)) kB/s, \(summary.snapshots) snapshots in \(fmt(summary.wall, 1)) s) |
            | server CPU, summary + inspect 2 threads (turn, timer) | \(fmt(core(inspecting.cpu, inspecting.wall), 1)) % (\(fmt(inspecting.bytes / inspecting.wall / 1000, 1)) kB/s) |
            | server CPU, the whole stream (no scope) | \(fmt(core(everything.cpu, everything.wall), 1)) % (\(fmt(everything.bytes / everything.wall / 1000, 1)) kB/s\(everything.dropped ? ", dropped by the server as too slow" : "")) |
            | RSS before workers / \(threads) idle / with timers | \(fmt(rssEmpty / 1_048_576, 1)) / \(fmt(rssIdle / 1_048_576, 1)) / \(fmt(rssBusy / 1_048_576, 1)) MiB |

            """
        section.emit(started: started, outputDirectory: out)
    }
}
