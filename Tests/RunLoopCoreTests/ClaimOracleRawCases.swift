import CoreFoundation
import Foundation
import RunLoopTestSupport

@testable import CFOracle

#if canImport(Glibc)
    import Glibc
#endif

/// The plain-CF cases the oracle's setups cannot say: loops of runs
/// (`CFRunLoopRun`, Foundation's `RunLoop.run` family, from
/// swift-corelibs-foundation itself), a source's schedule and cancel
/// routines, the thread a port's callout runs on, and a source added while
/// the loop sleeps. Raw CF and Foundation only; no runloopd code.
extension ClaimCase {
    typealias R = RawLoop

    static let raw: [ClaimCase] = [
        ClaimCase(
            name: "loops-of-runs-and-a-stop",
            shows:
                "CFRunLoopStop ends the one CFRunLoopRunInMode under way: CFRunLoopRun returns; Foundation's "
                + "run(until:) and run() run again, and only an empty mode ends run(); run(mode:before:) "
                + "answers true after a stop or a timeout and false only for a mode empty before the call"
        ) {
            var problems: [String] = []
            // CFRunLoopRunInMode: stopped.
            problems += R.stoppedOnce { _ in
                let reason = CFRunLoopRunInMode(kCFRunLoopDefaultMode, 5, false)
                return reason == .stopped ? [] : ["CFRunLoopRunInMode answered \(reason.rawValue), not stopped"]
            }
            // CFRunLoopRun: a stop ends it.
            problems += R.stoppedOnce { _ in
                CFRunLoopRun()
                return []
            }
            // run(until:): the stop ends one run; it runs again until its date.
            problems += R.stoppedOnce { entries in
                let until = Date(timeIntervalSinceNow: 1.5)
                RunLoop.current.run(until: until)
                return (Date() >= until ? [] : ["run(until:) returned before its date"])
                    + (entries() >= 2 ? [] : ["run(until:) did not run again after the stop"])
            }
            // run(mode:before:): true after a stop.
            problems += R.stoppedOnce { _ in
                RunLoop.current.run(mode: .default, before: .distantFuture)
                    ? [] : ["run(mode:before:) false after a stop"]
            }
            problems += R.loop { loop, _ in
                let timer = R.farTimer(loop)
                var out: [String] = []
                if !RunLoop.current.run(mode: .default, before: Date(timeIntervalSinceNow: 0.05)) {
                    out.append("run(mode:before:) false after a timeout")
                }
                CFRunLoopTimerInvalidate(timer)
                if RunLoop.current.run(mode: .default, before: Date(timeIntervalSinceNow: 0.05)) {
                    out.append("run(mode:before:) true for an empty mode")
                }
                return out
            }
            // run(): a stop does not end it; the mode emptied (and a wake-up) does.
            problems += R.stoppedOnce(thenEmpty: true) { entries in
                RunLoop.current.run()
                return entries() >= 2 ? [] : ["run() did not run again after the stop"]
            }
            return problems
        },
        ClaimCase(
            name: "schedule-and-cancel-routines",
            shows:
                "CFRunLoopAddSource calls a custom source's schedule routine for each mode; removing it from a "
                + "mode, and CFRunLoopSourceInvalidate, call its cancel routine"
        ) {
            R.loop { loop, _ in
                let calls = R.Calls()
                var context = CFRunLoopSourceContext()
                context.info = Unmanaged.passUnretained(calls).toOpaque()
                context.schedule = { info, _, mode in R.Calls.from(info).add("schedule \(R.name(mode))") }
                context.cancel = { info, _, mode in R.Calls.from(info).add("cancel \(R.name(mode))") }
                context.perform = { _ in }
                let source = CFRunLoopSourceCreate(nil, 0, &context)
                let tracking = cfMode("tracking")
                CFRunLoopAddSource(loop, source, kCFRunLoopDefaultMode)
                CFRunLoopAddSource(loop, source, tracking)
                CFRunLoopRemoveSource(loop, source, tracking)
                CFRunLoopSourceInvalidate(source)
                let expected = [
                    "schedule kCFRunLoopDefaultMode", "schedule tracking", "cancel tracking",
                    "cancel kCFRunLoopDefaultMode",
                ]
                return withExtendedLifetime(calls) { calls.list == expected ? [] : ["routines called: \(calls.list)"] }
            }
        },
        ClaimCase(
            name: "a-port-message-runs-on-the-loop-thread",
            shows: "a port source's callout runs on the thread whose run loop read the message, no other"
        ) {
            R.asleep { loop, asleep in
                guard let fd = eventfdCall?(0, 0), fd >= 0 else { return ["no eventfd"] }
                defer { close(fd) }
                let calls = R.Calls(fd: fd, loopThread: pthread_self())
                var context = CFRunLoopSourceContext1()
                context.version = 1
                context.info = Unmanaged.passUnretained(calls).toOpaque()
                context.getPort = { info in R.Calls.from(info).fd }
                context.perform = { info in
                    R.Calls.from(info).add(
                        pthread_equal(pthread_self(), R.Calls.from(info).loopThread) != 0 ? "loop" : "other")
                }
                let source = withUnsafeMutablePointer(to: &context) {
                    $0.withMemoryRebound(to: CFRunLoopSourceContext.self, capacity: 1) {
                        CFRunLoopSourceCreate(nil, 0, $0)
                    }
                }
                CFRunLoopAddSource(loop, source, kCFRunLoopDefaultMode)
                asleep {
                    var one: UInt64 = 1
                    _ = write(fd, &one, 8)
                }
                let reason = CFRunLoopRunInMode(kCFRunLoopDefaultMode, 5, true)
                CFRunLoopSourceInvalidate(source)
                return withExtendedLifetime(calls) {
                    (reason == .handledSource ? [] : ["the run answered \(reason.rawValue)"])
                        + (calls.list == ["loop"] ? [] : ["the callout ran on: \(calls.list)"])
                }
            }
        },
        ClaimCase(
            name: "adding-a-signalled-source0-does-not-wake",
            shows:
                "a signalled custom source added from another thread while the loop sleeps waits: the run times out, "
                + "and the next run handles it at once"
        ) {
            // Judged only when the source was added during the first run (a
            // machine that held the adding thread off the CPU past it is
            // asked again).
            for _ in 0..<5 {
                let problems = R.asleep { loop, asleep in Self.addWhileAsleep(loop, asleep) }
                if problems != ["not added during the run"] { return problems }
            }
            return ["the source was never added during the run, in 5 tries"]
        },
    ]

    /// A signalled source added while the loop sleeps, then a second run.
    static func addWhileAsleep(_ loop: CFRunLoop, _ asleep: (@escaping @Sendable () -> Void) -> Void) -> [String] {
        let timer = R.farTimer(loop)
        defer { CFRunLoopTimerInvalidate(timer) }
        let calls = R.Calls()
        var context = CFRunLoopSourceContext()
        context.info = Unmanaged.passUnretained(calls).toOpaque()
        context.perform = { info in R.Calls.from(info).add("perform") }
        let source = CFRunLoopSourceCreate(nil, 0, &context)
        defer { CFRunLoopSourceInvalidate(source) }
        let both = R.Box((loop, source))
        let added = Monitor(false)
        asleep {
            CFRunLoopSourceSignal(both.value.1)
            CFRunLoopAddSource(both.value.0, both.value.1, kCFRunLoopDefaultMode)
            added.update { $0 = true }
        }
        let first = CFRunLoopRunInMode(kCFRunLoopDefaultMode, 0.3, true)
        let before = calls.list
        guard added.value else {
            added.wait(timeout: 20) { $0 }
            return ["not added during the run"]
        }
        let second = CFRunLoopRunInMode(kCFRunLoopDefaultMode, 5, true)
        return withExtendedLifetime(calls) {
            (first == .timedOut && before.isEmpty ? [] : ["the first run answered \(first.rawValue), \(before)"])
                + (second == .handledSource ? [] : ["the next run answered \(second.rawValue)"])
        }
    }
}
