import CLinux
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The last guard of a stop: once SIGTERM (after its drain) or SIGINT has
/// asked runloopd to stop, this thread waits for the stop's bound plus a grace (or for a second
/// signal). If the process is still there then, the graceful stop is stuck
/// (a lock that is never released, a call that never returns): it writes
/// what every thread is blocked in, read from `/proc/self/task`, straight to
/// standard error and ends the process with `exitCode`.
///
/// It shares nothing with the rest of runloopd: no lock, no logger (either
/// may be what is stuck): it formats its lines with the log's own pure line
/// builders and uses only `sigtimedwait`, `open`/`read` of `/proc` and
/// `write(2)`. A stop that ends in time returns from `main` first and the
/// watchdog dies with the process.
enum StopWatchdog {
    /// The exit status of a stop the watchdog had to end (EX_SOFTWARE).
    static let exitCode: Int32 = 70
    /// How long past the stop's own bound the watchdog waits.
    static let grace: Double = 1

    /// `arm` with SIGINT and SIGTERM as the stop signals.
    static func armForStop(bound: Double, json: Bool) {
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGINT)
        sigaddset(&signals, SIGTERM)
        arm(bound: bound, signals: signals, json: json)
    }

    /// Starts the watchdog: `bound` is the graceful stop's deadline in
    /// seconds; `signals` the stop signals (blocked in every thread), a second
    /// one of which ends the process at once; `json` writes the report as
    /// JSON log lines.
    static func arm(bound: Double, signals: sigset_t, json: Bool) {
        let seconds = bound + grace
        let thread = Thread {
            _ = clinux_set_thread_name("rl-stop-watch")
            var set = signals
            var timeout = timespec(tv_sec: Int(seconds), tv_nsec: Int((seconds - seconds.rounded(.down)) * 1e9))
            var received: Int32 = -1
            while true {
                received = sigtimedwait(&set, nil, &timeout)
                // EINTR: some other signal woke it; the remaining time is not
                // reported back, so a rare early wake only shortens nothing.
                if received == -1 && errno == EINTR { continue }
                break
            }
            let why =
                received > 0
                ? "a second stop signal arrived during the stop"
                : "the stop did not end within its \(bound) s bound and a \(grace) s grace"
            report(why: why, json: json)
            _exit(exitCode)
        }
        thread.start()
    }

    /// Writes the verdict and one line per thread (name, state, kernel wait
    /// channel, system call), in the log's own format but straight to stderr.
    static func report(why: String, json: Bool) {
        let threads = threadStates()
        let now = Date()
        // Counts and thread ids are numbers (JSON numbers under --log-format json).
        func line(_ message: String, _ fields: [(String, JSONLogLine.FieldValue)]) -> String {
            json
                ? JSONLogLine.line(
                    at: now, level: .critical, label: "runloopd", message: message, source: "runloopd", values: fields)
                : TextLogLine.line(
                    at: now, level: .critical, label: "runloopd", fields: fields.map { ($0, $1.text) },
                    source: "runloopd", message: message)
        }
        var text = line(
            "stop watchdog: \(why); ending the process (exit \(exitCode))", [("threads", .literal("\(threads.count)"))])
        for thread in threads {
            text += line(
                "stop watchdog: thread",
                [
                    ("tid", .literal("\(thread.tid)")), ("name", .string(thread.name)),
                    ("state", .string(thread.state)),
                    ("wchan", .string(thread.wchan)), ("syscall", .string(thread.syscall)),
                ])
        }
        writeAll(text)
    }

    struct ThreadState {
        var tid: Int
        var name: String
        var state: String
        var wchan: String
        var syscall: String
    }

    /// Every thread of this process as `/proc/self/task` shows it.
    static func threadStates() -> [ThreadState] {
        guard let directory = opendir("/proc/self/task") else { return [] }
        defer { closedir(directory) }
        var tids: [Int] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if let tid = Int(name) { tids.append(tid) }
        }
        return tids.sorted().map { tid in
            let base = "/proc/self/task/\(tid)/"
            let stat = readText(base + "stat")
            // The state follows the parenthesised name: "tid (name) S ...".
            let state =
                stat.range(of: ") ", options: .backwards).map { String(stat[$0.upperBound...].prefix(1)) } ?? "?"
            let syscallLine = readText(base + "syscall")
            let number = syscallLine.split(separator: " ").first.flatMap { Int($0) }
            return ThreadState(
                tid: tid, name: readText(base + "comm"), state: state, wchan: readText(base + "wchan"),
                syscall: number.map(syscallName) ?? syscallLine)
        }
    }

    /// The common blocking system calls by number (the raw number otherwise).
    static func syscallName(_ number: Int) -> String {
        #if arch(x86_64)
            let names = [
                0: "read", 1: "write", 7: "poll", 23: "select", 35: "nanosleep", 202: "futex", 232: "epoll_wait",
                281: "epoll_pwait", 271: "ppoll", 128: "rt_sigtimedwait", 61: "wait4", 230: "clock_nanosleep",
            ]
        #elseif arch(arm64)
            let names = [
                63: "read", 64: "write", 73: "ppoll", 98: "futex", 22: "epoll_pwait", 137: "rt_sigtimedwait",
                260: "wait4", 115: "clock_nanosleep", 101: "nanosleep",
            ]
        #else
            let names: [Int: String] = [:]
        #endif
        return names[number].map { "\($0) (\(number))" } ?? "\(number)"
    }

    /// A small `/proc` file's text, trimmed ("" when unreadable).
    private static func readText(_ path: String) -> String {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return "" }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 512)
        let count = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { return "" }
        return String(decoding: bytes.prefix(count), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    private static func writeAll(_ text: String) {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeMutableBytes { write(2, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return }
            offset += written
        }
    }
}
