import Foundation

/// What Linux's scheduler counts for a thread or the machine, for tests that
/// must tell a wrong answer from a thread that was kept from a CPU.
public enum SchedStat {
    /// One thread's totals since it began (ms).
    public struct Times: Sendable, Equatable {
        /// Time it ran on a CPU.
        public var cpuMs: Double
        /// Time it waited, runnable, for a CPU (`run_delay`).
        public var waitMs: Double
    }

    /// Thread `tid`'s totals, from `/proc/<pid>/task/<tid>/schedstat` (its
    /// first two fields, ns); `pid` nil is this process. Nil if it is gone.
    public static func thread(_ tid: Int32, of pid: Int32? = nil) -> Times? {
        guard tid > 0 else { return nil }
        let path = "/proc/\(pid.map(String.init) ?? "self")/task/\(tid)/schedstat"
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let cpu = Double(fields[0]), let wait = Double(fields[1]) else { return nil }
        return Times(cpuMs: cpu / 1e6, waitMs: wait / 1e6)
    }

    /// Every thread of process `pid` now: its name (`comm`, at most 15
    /// bytes) and totals, by thread id.
    public static func threads(of pid: Int32) -> [Int32: (name: String, times: Times)] {
        let tids = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        var all: [Int32: (name: String, times: Times)] = [:]
        for tid in tids.compactMap({ Int32($0) }) {
            guard let times = thread(tid, of: pid),
                let comm = try? String(contentsOfFile: "/proc/\(pid)/task/\(tid)/comm", encoding: .utf8)
            else { continue }
            all[tid] = (comm.trimmingCharacters(in: .newlines), times)
        }
        return all
    }

    /// The CPU time the host has taken from this machine's CPUs (ms): the
    /// `steal` column of `/proc/stat`'s `cpu` line (ticks). 0 where there is none.
    public static func stolenMs() -> Double {
        let text = (try? String(contentsOfFile: "/proc/stat", encoding: .utf8)) ?? ""
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("cpu ") }) else { return 0 }
        let fields = line.split(separator: " ")
        guard fields.count > 8, let ticks = Double(fields[8]) else { return 0 }
        return ticks * 1000 / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
}
