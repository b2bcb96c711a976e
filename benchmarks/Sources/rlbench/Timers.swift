import CoreFoundation
import Foundation
import RunLoopCore

/// Timer lateness: 10,000 repeating timers spread over 16 workers, intervals
/// uniform in 1 ms–1 s, first fires staggered over one interval; lateness of
/// every fire = fire time − its grid point (first + k·interval), as
/// `TimerRecord` reports it in its `.timer` event.
///
/// - candidate: RunLoopCore (`Worker.addTimer`), lateness from the events;
/// - baseline: one plain `CFRunLoopTimer` alone (1 ms) on a plain CF thread;
/// - extra: the same 10,000-timer shape on 16 plain CF threads (how much of the
///   tail is CF's and the machine's, not RunLoopCore's).
enum TimerBenchmark {
    final class Collector: @unchecked Sendable {
        private let lock = NSLock()
        private var samples: [Double] = []
        private var on = false
        func start() {
            lock.lock()
            samples.removeAll(keepingCapacity: true)
            samples.reserveCapacity(1_000_000)
            on = true
            lock.unlock()
        }
        func add(_ seconds: Double) {
            lock.lock()
            if on { samples.append(seconds) }
            lock.unlock()
        }
        func stop() -> [Double] {
            lock.lock()
            on = false
            let all = samples
            lock.unlock()
            return all
        }
    }

    static func intervals(_ count: Int, shortest: Double = 0.001) -> [(interval: Double, delay: Double)] {
        var rng = SystemRandomNumberGenerator()
        return (0..<count).map { _ in
            let interval = Double.random(in: shortest...1.0, using: &rng)
            return (interval, Double.random(in: 0...interval, using: &rng))
        }
    }

    static func run(timers: Int, workers: Int, seconds: Double, out: String) {
        let started = nowMono()
        var section = Section(
            id: "timers", title: "Timer lateness (\(timers) timers on \(workers) workers, 1 ms–1 s)",
            command: "rlbench timers")
        let shape = intervals(timers)
        let candidate = measureClean("RunLoopCore \(timers) timers", attempts: 2) {
            runLoopCore(shape: shape, workers: workers, seconds: seconds)
        }
        let sameShape = measureClean("plain CF \(timers) timers", attempts: 2) {
            plainCF(shape: shape, threads: workers, seconds: seconds / 2)
        }
        let alone = measureClean("plain CF timer alone", attempts: 2) {
            plainCF(shape: [(0.001, 0.001)], threads: 1, seconds: seconds)
        }
        // The same count at a lighter rate (intervals 100 ms–1 s): how much of
        // the tail is the fire rate rather than the number of timers.
        let lightShortest = 0.1
        let lightRate = Int(Double(timers) * log(1 / lightShortest) / (1 - lightShortest))
        let light = intervals(timers, shortest: lightShortest)
        let lightCandidate = measureClean("RunLoopCore \(timers) timers, 100 ms–1 s", attempts: 2) {
            runLoopCore(shape: light, workers: workers, seconds: seconds / 2)
        }
        let lightPlain = measureClean("plain CF \(timers) timers, 100 ms–1 s", attempts: 2) {
            plainCF(shape: light, threads: workers, seconds: seconds / 2)
        }
        let lc = Percentiles(lightCandidate.value)
        let lp = Percentiles(lightPlain.value)
        let c = Percentiles(candidate.value)
        let s = Percentiles(sameShape.value)
        let a = Percentiles(alone.value)
        let steal = max(candidate.steal, alone.steal)
        let clean = candidate.clean && alone.clean
        func ms(_ v: Double) -> String { fmt(v * 1e3, 3) }
        func inMs(_ v: Double) -> String { ms(v) + " ms" }
        section.figures += [
            Figure(
                "lateness p99 (\(c.count) fires)", c.p99, versus: a.p99, show: inMs, note: " (one CF timer alone)",
                digits: 1, goal: "≤ 1 ms", pass: c.p99 <= 1e-3, steal: steal, clean: clean),
            Figure("lateness p50", c.p50, versus: a.p50, show: inMs, digits: 1, steal: steal, clean: clean),
            Figure("lateness max", c.max, versus: a.max, show: inMs, digits: 1, steal: steal, clean: clean),
        ]
        section.figures.append(
            Figure(
                name: "lateness p50 / p99, same \(timers) timers at 100 ms–1 s (≈ \(lightRate) fires/s)",
                value: "\(ms(lc.p50)) / \(ms(lc.p99)) ms",
                baseline: "\(ms(lp.p50)) / \(ms(lp.p99)) ms (plain CF, same timers)",
                ratio: fmt(lc.p99 / lp.p99, 2) + "× (p99)", goal: "—", pass: nil,
                steal: max(lightCandidate.steal, lightPlain.steal), clean: lightCandidate.clean && lightPlain.clean))
        section.details = """
            | run | fires | p50 (ms) | p99 (ms) | max (ms) | steal |
            |---|---|---|---|---|---|
            | RunLoopCore: \(timers) timers / \(workers) workers, \(fmt(seconds, 0)) s | \(c.count) | \(ms(c.p50)) | \(ms(c.p99)) | \(ms(c.max)) | \(fmt(candidate.steal, 1)) % |
            | plain CF, same \(timers) timers / \(workers) threads, \(fmt(seconds / 2, 0)) s | \(s.count) | \(ms(s.p50)) | \(ms(s.p99)) | \(ms(s.max)) | \(fmt(sameShape.steal, 1)) % |
            | RunLoopCore: same count at 100 ms–1 s, \(fmt(seconds / 2, 0)) s | \(lc.count) | \(ms(lc.p50)) | \(ms(lc.p99)) | \(ms(lc.max)) | \(fmt(lightCandidate.steal, 1)) % |
            | plain CF: same count at 100 ms–1 s, \(fmt(seconds / 2, 0)) s | \(lp.count) | \(ms(lp.p50)) | \(ms(lp.p99)) | \(ms(lp.max)) | \(fmt(lightPlain.steal, 1)) % |
            | plain CF, one 1 ms timer alone, \(fmt(seconds, 0)) s | \(a.count) | \(ms(a.p50)) | \(ms(a.p99)) | \(ms(a.max)) | \(fmt(alone.steal, 1)) % |

            """
        section.notes.append(
            "Intervals uniform in [1 ms, 1 s] (≈ \(Int(Double(timers) * log(1000) / 0.999)) fires/s in all), first fire at a random point of the first interval; lateness measured against the timer's grid, as `TimerRecord` does."
        )
        section.notes.append(
            "Reference (docs/benchmarking.md): CFRunLoopTimer lateness, 10k timers on 16 threads over 5 s: p50 34 µs, p99 167 µs, max 2.1 ms."
        )
        section.emit(started: started, outputDirectory: out)
    }

    static func runLoopCore(shape: [(interval: Double, delay: Double)], workers: Int, seconds: Double) -> [Double] {
        var limits = Limits()
        limits.maxTimersPerWorker = shape.count / workers + 1
        limits.latenessWindow = 16
        let collector = Collector()
        let registry = WorkerRegistry(limits: limits) { event in
            if case .timer(_, _, _, let latenessMs, _) = event { collector.add(latenessMs / 1000) }
        }
        var list: [Worker] = []
        for index in 0..<workers {
            guard let worker = try? registry.createWorker(WorkerOptions(name: "timers-\(index)")) else {
                fatalError("cannot create worker")
            }
            list.append(worker)
        }
        for (index, item) in shape.enumerated() {
            do {
                _ = try list[index % workers].addTimer(TimerSpec(interval: item.interval, delay: item.delay + 0.2))
            } catch {
                fatalError("addTimer: \(error)")
            }
        }
        usleep(1_200_000)  // every timer past its first fire
        collector.start()
        usleep(UInt32(seconds * 1e6))
        let samples = collector.stop()
        registry.endAll(timeout: 10)
        return samples
    }

    final class PlainThread: @unchecked Sendable {
        var loop: CFRunLoop?
        let ready = DispatchSemaphore(value: 0)
        let ended = DispatchSemaphore(value: 0)
    }

    static func plainCF(shape: [(interval: Double, delay: Double)], threads: Int, seconds: Double) -> [Double] {
        let collector = Collector()
        var sides: [PlainThread] = []
        var timers: [CFRunLoopTimer] = []
        for _ in 0..<threads {
            let side = PlainThread()
            let thread = Thread {
                side.loop = CFRunLoopGetCurrent()
                // A timer far away keeps the mode alive until the timers arrive.
                let keep = CFRunLoopTimerCreateWithHandler(
                    kCFAllocatorDefault, CFAbsoluteTimeGetCurrent() + 86_400, 86_400, 0, 0
                ) { _ in }
                CFRunLoopAddTimer(side.loop, keep, kCFRunLoopDefaultMode)
                side.ready.signal()
                CFRunLoopRun()
                side.ended.signal()
            }
            thread.start()
            side.ready.wait()
            sides.append(side)
        }
        for (index, item) in shape.enumerated() {
            let first = CFAbsoluteTimeGetCurrent() + item.delay + 0.2
            let interval = item.interval
            let timer = CFRunLoopTimerCreateWithHandler(kCFAllocatorDefault, first, interval, 0, 0) { _ in
                let now = CFAbsoluteTimeGetCurrent()
                let steps = now > first ? ((now - first) / interval).rounded(.down) : 0
                collector.add(max(0, now - (first + steps * interval)))
            }
            timers.append(timer!)
            CFRunLoopAddTimer(sides[index % threads].loop, timer, kCFRunLoopDefaultMode)
        }
        usleep(1_200_000)
        collector.start()
        usleep(UInt32(seconds * 1e6))
        let samples = collector.stop()
        for timer in timers { CFRunLoopTimerInvalidate(timer) }
        for side in sides {
            CFRunLoopStop(side.loop)
            CFRunLoopWakeUp(side.loop)
        }
        return samples
    }
}
