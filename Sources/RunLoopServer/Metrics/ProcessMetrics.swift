import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The standard `process_*` figures (as Prometheus's own client libraries
/// name them), read from `/proc/self` at each scrape. Linux only: elsewhere
/// `read()` answers nil and the families are left out.
struct ProcessMetrics {
    var cpuSeconds: Double
    var residentBytes: Double
    var virtualBytes: Double
    var startTimeSeconds: Double
    var openFDs: Double
    var maxFDs: Double

    static func read() -> ProcessMetrics? {
        #if os(Linux)
            guard let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { return nil }
            // Fields after the command name (which may hold spaces), counted
            // from field 3 (`state`): utime is field 14, so index 11 here.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 21, let utime = Double(fields[11]), let stime = Double(fields[12]),
                let start = Double(fields[19]), let vsize = Double(fields[20]), let rss = Double(fields[21])
            else { return nil }
            let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
            let page = Double(sysconf(Int32(_SC_PAGESIZE)))
            var limit = rlimit()
            getrlimit(RLIMIT_NOFILE_VALUE, &limit)
            return ProcessMetrics(
                cpuSeconds: (utime + stime) / ticks, residentBytes: rss * page, virtualBytes: vsize,
                startTimeSeconds: bootTime() + start / ticks, openFDs: Double(openDescriptors()),
                maxFDs: Double(limit.rlim_cur))
        #else
            return nil
        #endif
    }

    #if os(Linux)
        private static let RLIMIT_NOFILE_VALUE = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)

        /// `btime` of /proc/stat: the boot time, in seconds since the epoch.
        private static func bootTime() -> Double {
            guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8) else { return 0 }
            for line in text.split(separator: "\n") where line.hasPrefix("btime ") {
                return Double(line.dropFirst(6).trimmingCharacters(in: .whitespaces)) ?? 0
            }
            return 0
        }

        /// The entries of /proc/self/fd, less the one this listing opens.
        private static func openDescriptors() -> Int {
            guard let dir = opendir("/proc/self/fd") else { return 0 }
            defer { closedir(dir) }
            let own = dirfd(dir)
            var count = 0
            while let entry = readdir(dir) {
                let name = withUnsafePointer(to: entry.pointee.d_name) {
                    $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
                }
                guard let fd = Int32(name), fd != own else { continue }
                count += 1
            }
            return count
        }
    #endif
}
