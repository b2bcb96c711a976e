import Foundation
import RunLoopTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// Monotonic time in seconds.
@inline(__always)
func nowMono() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// Monotonic time in nanoseconds.
@inline(__always)
func nowNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// The first line of /proc/stat: every CPU's time, with steal.
struct CPUTimes {
    var total: UInt64 = 0
    var steal: UInt64 = 0
    var idle: UInt64 = 0

    static func read() -> CPUTimes {
        guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
            let line = text.split(separator: "\n").first
        else { return CPUTimes() }
        let fields = line.split(separator: " ").dropFirst().compactMap { UInt64($0) }
        var times = CPUTimes()
        // user nice system idle iowait irq softirq steal guest guest_nice;
        // guest time is already counted in user.
        times.total = fields.prefix(8).reduce(0, +)
        times.idle = fields.count > 4 ? fields[3] + fields[4] : 0
        times.steal = fields.count > 7 ? fields[7] : 0
        return times
    }
}

/// Steal (and busy) % of all CPU time between two samples.
struct StealWindow {
    let start = CPUTimes.read()
    var stealPercent: Double { Self.percent(from: start, to: CPUTimes.read()).steal }
    func finish() -> (steal: Double, busy: Double) { Self.percent(from: start, to: CPUTimes.read()) }

    static func percent(from a: CPUTimes, to b: CPUTimes) -> (steal: Double, busy: Double) {
        let total = Double(b.total &- a.total)
        guard total > 0 else { return (0, 0) }
        let steal = Double(b.steal &- a.steal) / total * 100
        let busy = (total - Double(b.idle &- a.idle)) / total * 100
        return (steal, busy)
    }
}

/// The steal threshold above which a run is contaminated (docs/benchmarking.md).
let stealLimit = 5.0

/// Runs `body` up to `attempts` times until its steal is ≤ 5 %; returns the
/// cleanest attempt, its steal and whether it is clean.
func measureClean<T>(
    _ label: String, attempts: Int = 3, _ body: () -> T
) -> (value: T, steal: Double, clean: Bool, tries: Int) {
    var best: (T, Double)?
    var tries = 0
    for attempt in 1...attempts {
        tries = attempt
        let window = StealWindow()
        let value = body()
        let steal = window.finish().steal
        log("  \(label): attempt \(attempt) steal \(fmt(steal, 1)) %")
        if best == nil || steal < best!.1 { best = (value, steal) }
        if steal <= stealLimit { break }
    }
    return (best!.0, best!.1, best!.1 <= stealLimit, tries)
}

/// Percentiles of a sample (sorted copy).
struct Percentiles {
    let count: Int
    let p50: Double
    let p99: Double
    let max: Double
    let mean: Double

    init(_ values: [Double]) {
        let sorted = values.sorted()
        count = sorted.count
        func at(_ q: Double) -> Double {
            guard !sorted.isEmpty else { return .nan }
            let index = Swift.min(sorted.count - 1, Swift.max(0, Int((q * Double(sorted.count)).rounded(.up)) - 1))
            return sorted[index]
        }
        p50 = at(0.5)
        p99 = at(0.99)
        max = sorted.last ?? .nan
        mean = sorted.isEmpty ? .nan : sorted.reduce(0, +) / Double(sorted.count)
    }
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return .nan }
    let mid = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

func fmt(_ value: Double, _ digits: Int = 1) -> String {
    guard value.isFinite else { return "n/a" }
    return String(format: "%.\(digits)f", value)
}

/// A duration in seconds, in the unit that reads best.
func fmtDuration(_ seconds: Double) -> String {
    guard seconds.isFinite else { return "n/a" }
    if seconds < 1e-3 { return "\(fmt(seconds * 1e6, 1)) µs" }
    if seconds < 1 { return "\(fmt(seconds * 1e3, 2)) ms" }
    return "\(fmt(seconds, 2)) s"
}

func log(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}

/// The machine, as every report prints it.
struct Environment: Codable {
    var cores: Int
    var cpuModel: String
    var kernel: String
    var loadAverage: String
    var swift: String

    static func current() -> Environment {
        var uts = utsname()
        uname(&uts)
        let release = withUnsafeBytes(of: &uts.release) {
            String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let model =
            cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }.map {
                $0.split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) } ?? "?"
            } ?? "?"
        let load =
            ((try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? "?")
            .split(separator: " ").prefix(3).joined(separator: " ")
        return Environment(
            cores: Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))), cpuModel: model, kernel: "Linux \(release)",
            loadAverage: load, swift: swiftVersion())
    }

    static func swiftVersion() -> String {
        #if compiler(>=6.3)
            return "Swift 6.3+ (release build)"
        #else
            return "Swift 6.x (release build)"
        #endif
    }

    var line: String { "\(cores) cores (\(cpuModel)), \(kernel), load \(loadAverage), \(swift)" }
}

/// Descriptors and threads of this process.
func openDescriptors() -> Int { (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1 }
func threadCount() -> Int { (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").count) ?? -1 }

/// Resident set size in bytes (/proc/self/statm).
func residentBytes() -> Int {
    guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return -1 }
    let fields = text.split(separator: " ").compactMap { Int($0) }
    return fields.count > 1 ? fields[1] * Int(sysconf(Int32(_SC_PAGESIZE))) : -1
}

/// The runloopd under test on a free port (`--public-dir`, `--log-level
/// error`, then `extra`); a start that fails ends the benchmark with why.
func startRunloopd(_ runloopd: String, publicDir: String, _ extra: [String] = []) -> ServerProcess {
    do {
        return try .runloopd(
            binary: URL(fileURLWithPath: runloopd),
            arguments: ["--public-dir", publicDir, "--log-level", "error"] + extra)
    } catch { fatalError("\(error)") }
}

/// utime + stime of process `pid` (nil: this one) in seconds so far
/// (/proc/PID/stat, clock ticks).
func processCPUSeconds(_ pid: Int32? = nil) -> Double {
    guard let text = try? String(contentsOfFile: "/proc/\(pid.map(String.init) ?? "self")/stat", encoding: .utf8),
        let close = text.lastIndex(of: ")")
    else { return .nan }
    // Fields after "comm)": state is field 3; utime 14, stime 15.
    let rest = text[text.index(after: close)...].split(separator: " ")
    guard rest.count > 13, let utime = Double(rest[11]), let stime = Double(rest[12]) else { return .nan }
    return (utime + stime) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// utime + stime from getrusage, in seconds (µs resolution).
func rusageCPUSeconds() -> Double {
    var usage = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6 + Double(usage.ru_stime.tv_sec)
        + Double(usage.ru_stime.tv_usec) / 1e6
}

/// Raises RLIMIT_NOFILE to its hard limit (1,000 workers hold 4,000+ descriptors).
func raiseDescriptorLimit() {
    var limit = rlimit()
    getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    limit.rlim_cur = limit.rlim_max
    setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
}
