import Foundation
import RunLoopCore
import RunLoopTestSupport

/// The scale curve: workers 1 → 1,000 and timers 1 → 100,000 on one worker.
/// For each size: the cost of creating the items that took it there (per
/// item) and the latency of `GET /api/threads/{id}` at that size, through the
/// real runloopd binary (raised --max-threads / --max-timers); plus the same
/// creations in-process through RunLoopCore alone (the engine's share).
enum ScaleBenchmark {
    static let workerSizes = [1, 10, 100, 1000]
    static let timerSizes = [1, 10, 100, 1000, 10_000, 100_000]

    struct Point {
        var size: Int
        var httpCreate: Double  // seconds per item (median of the band)
        var httpCreateMean: Double
        var engineCreate: Double  // seconds per item (mean of the band)
        var getP50: Double
        var getP99: Double
        var note = ""
    }

    static func run(runloopd: String, publicDir: String, getSamples: Int, budget: Double, out: String) {
        let started = nowMono()
        raiseDescriptorLimit()
        var section = Section(id: "scale", title: "Scale curve", command: "rlbench scale")
        let maxWorkers = workerSizes.last!
        let maxTimers = timerSizes.last!
        let deadline = nowMono() + budget

        // Engine alone, in-process.
        var limits = Limits()
        limits.maxWorkers = maxWorkers + 8
        limits.maxTimersPerWorker = maxTimers + 8
        let registry = WorkerRegistry(limits: limits)
        var engineWorkers: [Double] = []
        var count = 0
        for size in workerSizes {
            let t0 = nowMono()
            let n = size - count
            for _ in 0..<n { _ = try? registry.createWorker() }
            engineWorkers.append((nowMono() - t0) / Double(n))
            count = size
        }
        registry.endAll(timeout: 30)
        var engineTimers: [Double] = []
        var engineNote = ""
        let engineDeadline = nowMono() + budget / 3
        let timerWorker = try? Worker(
            id: "scale-timers", options: WorkerOptions(), limits: limits, selectors: registry.selectors)
        count = 0
        for size in timerSizes {
            let t0 = nowMono()
            let n = size - count
            var made = 0
            for _ in 0..<n {
                if nowMono() > engineDeadline { break }
                _ = try? timerWorker?.addTimer(TimerSpec(interval: 3600))
                made += 1
            }
            engineTimers.append(made > 0 ? (nowMono() - t0) / Double(made) : .nan)
            count += made
            if made < n {
                engineNote = "engine stopped at \(count) timers (time budget)"
                break
            }
        }
        timerWorker?.endAndWait()

        // Through HTTP, the real binary.
        let server = startRunloopd(
            runloopd, publicDir: publicDir, ["--max-threads", "\(maxWorkers + 8)", "--max-timers", "\(maxTimers + 8)"])
        defer { server.stop(signal: SIGINT, grace: 8) }
        guard let client = try? TestHTTPConnection(port: server.port) else { fatalError("cannot connect") }

        func getLatency(_ path: String, samples: Int) -> Percentiles {
            var values: [Double] = []
            for _ in 0..<samples {
                let t0 = nowMono()
                _ = try? client.json("GET", path)
                values.append(nowMono() - t0)
            }
            return Percentiles(values)
        }

        var workerPoints: [Point] = []
        var firstThread = ""
        count = 0
        let stealWorkers = StealWindow()
        for (index, size) in workerSizes.enumerated() {
            var times: [Double] = []
            for _ in 0..<(size - count) {
                let t0 = nowMono()
                guard let answer = try? client.json("POST", "/api/threads", body: "{}"),
                    answer.status == 201 || answer.status == 200
                else { fatalError("POST /api/threads failed at \(count)") }
                times.append(nowMono() - t0)
                if firstThread.isEmpty { firstThread = HopBenchmark.threadIdentifier(answer.text) ?? "t1" }
            }
            count = size
            let get = getLatency("/api/threads/\(firstThread)", samples: getSamples)
            workerPoints.append(
                Point(
                    size: size, httpCreate: median(times), httpCreateMean: times.reduce(0, +) / Double(times.count),
                    engineCreate: engineWorkers[index], getP50: get.p50, getP99: get.p99))
            log("scale: \(size) workers, create \(fmtDuration(median(times))), GET p50 \(fmtDuration(get.p50))")
        }
        let workerSteal = stealWorkers.finish().steal

        // Timers on one fresh worker.
        guard let created = try? client.json("POST", "/api/threads", body: #"{"name":"scale-timers"}"#),
            let timerThread = HopBenchmark.threadIdentifier(created.text)
        else { fatalError("cannot create the timer thread") }
        var timerPoints: [Point] = []
        count = 0
        let stealTimers = StealWindow()
        for (index, size) in timerSizes.enumerated() {
            var times: [Double] = []
            var cut = false
            for _ in 0..<(size - count) {
                if nowMono() > deadline {
                    cut = true
                    break
                }
                let t0 = nowMono()
                guard
                    let answer = try? client.json(
                        "POST", "/api/threads/\(timerThread)/timers", body: #"{"interval":3600}"#),
                    answer.status == 201 || answer.status == 200
                else { fatalError("POST timers failed at \(count)") }
                times.append(nowMono() - t0)
                count += 1
            }
            let get = getLatency("/api/threads/\(timerThread)", samples: size >= 10_000 ? getSamples / 5 : getSamples)
            var point = Point(
                size: count, httpCreate: median(times),
                httpCreateMean: times.isEmpty ? .nan : times.reduce(0, +) / Double(times.count),
                engineCreate: index < engineTimers.count ? engineTimers[index] : .nan, getP50: get.p50, getP99: get.p99)
            if cut { point.note = "stopped at \(count) of \(size): time budget" }
            timerPoints.append(point)
            log("scale: \(count) timers, create \(fmtDuration(point.httpCreate)), GET p50 \(fmtDuration(get.p50))")
            if cut { break }
        }
        let timerSteal = stealTimers.finish().steal

        func table(_ title: String, _ points: [Point]) -> String {
            var text =
                "| \(title) | create per item, HTTP (median / mean of the band) | create per item, engine in-process | GET /api/threads/{id} p50 | p99 |\n|---|---|---|---|---|\n"
            for point in points {
                text +=
                    "| \(point.size)\(point.note.isEmpty ? "" : " (\(point.note))") | \(fmtDuration(point.httpCreate)) / \(fmtDuration(point.httpCreateMean)) | \(fmtDuration(point.engineCreate)) | \(fmtDuration(point.getP50)) | \(fmtDuration(point.getP99)) |\n"
            }
            return text
        }
        section.details =
            "Each row: the items created to go from the previous size to this one (median and mean time per `POST`, and the engine alone in-process, mean), then \(getSamples) sequential `GET /api/threads/{id}` (fewer at ≥ 10,000 timers) on one keep-alive connection.\n\n"
            + "Workers (steal \(fmt(workerSteal, 1)) %):\n\n" + table("workers", workerPoints)
            + "\nTimers on one worker (interval 3600 s; steal \(fmt(timerSteal, 1)) %):\n\n"
            + table("timers", timerPoints)

        if !engineNote.isEmpty { section.notes.append(engineNote) }
        // The curves as pictures (log-log: flat or logarithmic shows as it is).
        func chart(_ points: [Point], title: String, items: String, create: String, file: String) {
            func series(_ name: String, _ value: (Point) -> Double) -> SVGChart.Series {
                SVGChart.Series(name: name, points: points.map { (Double($0.size), value($0) * 1e6) })
            }
            SVGChart.write(
                SVGChart.line(
                    title: title, xLabel: items, yLabel: "µs",
                    series: [
                        series("GET p50") { $0.getP50 }, series("GET p99") { $0.getP99 },
                        series("\(create), HTTP") { $0.httpCreate }, series("\(create), engine") { $0.engineCreate },
                    ], logX: true, logY: true), to: "benchmarks/charts/\(file)")
        }
        chart(
            workerPoints, title: "Scale: workers 1 → \(maxWorkers)", items: "workers", create: "create",
            file: "scale-workers.svg")
        chart(
            timerPoints, title: "Scale: timers on one worker 1 → \(maxTimers)", items: "timers", create: "add",
            file: "scale-timers.svg")
        section.details +=
            "\n![Scale with workers](benchmarks/charts/scale-workers.svg)\n![Scale with timers](benchmarks/charts/scale-timers.svg)\n"
        // Figures: growth from the smallest to the largest size (`by`: "at 64 workers", "with 10 timers").
        func growth(_ points: [Point], _ items: String, by: String, create: String, digits: Int, steal: Double) {
            guard let first = points.first, let last = points.last else { return }
            section.figures.append(
                Figure(
                    name: "GET /api/threads/{id} p50 \(by) \(last.size) \(items)", value: fmtDuration(last.getP50),
                    baseline: fmtDuration(first.getP50) + " \(by) \(first.size)",
                    ratio: fmt(last.getP50 / first.getP50, digits) + "×",
                    goal: "flat or log", pass: nil, steal: steal, clean: steal <= stealLimit))
            section.figures.append(
                Figure(
                    name: "\(create), per item, at \(last.size) (HTTP / engine)",
                    value: "\(fmtDuration(last.httpCreate)) / \(fmtDuration(last.engineCreate))",
                    baseline: "\(fmtDuration(first.httpCreate)) / \(fmtDuration(first.engineCreate)) at \(first.size)",
                    ratio: fmt(last.httpCreate / first.httpCreate, digits) + "× (HTTP)", goal: "flat or log", pass: nil,
                    steal: steal, clean: steal <= stealLimit))
        }
        growth(workerPoints, "workers", by: "at", create: "create a worker", digits: 2, steal: workerSteal)
        growth(timerPoints, "timers", by: "with", create: "add a timer", digits: 1, steal: timerSteal)
        section.emit(started: started, outputDirectory: out)
    }
}
