import CLinux
import CoreFoundation
import Foundation
import Synchronization

/// The loop budgets of one worker (docs/budgets.md, "Loops"): how deep its
/// runs may nest, how much stack a nested run needs left, and how much CPU
/// its nested runs may take back to back before the thread counts as
/// livelocked. Every check is made before CF starts the run it is about.
///
/// Threads: `admitNested`, `runStarted`, `runFinished` and `loopSleptInBudget`
/// run on the worker's own thread; `checkNestingAdmission` on any thread.
/// State: the book (one lock); `livelockFlag` mirrors `WorkerBook.livelocked`
/// so that the loop's every sleep can look at it without the lock.
extension Worker {
    /// The calling thread's CPU time, in seconds.
    static func threadCPUSeconds() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }

    /// Records the thread's stack bounds (on the worker's thread, at its start).
    func noteStack() {
        var low: UInt = 0
        var high: UInt = 0
        guard clinux_stack_bounds(&low, &high) == 0 else { return }
        book.withLock { b in
            b.stackLow = low
            b.stackHigh = high
        }
    }

    /// Why a nested run was refused (a label of `runloopd_nested_runs_refused_total`).
    enum NestRefusal: String, CaseIterable, Sendable {
        case depth, stack, livelock, ending
    }

    private enum Admission {
        case admit
        case refuse(NestRefusal, RunLoopError, newLivelock: (cpu: Double, depth: Int)?)
    }

    /// Decides, before CF starts it, whether a nested run may start now on
    /// this (the worker's own) thread; throws the refusal.
    func admitNested() throws(RunLoopError) {
        let here = UInt(clinux_stack_here())
        let cpu = Self.threadCPUSeconds()
        let admission: Admission = book.withLock { b in
            if b.cancelled || b.closing {
                return .refuse(
                    .ending,
                    .conflict(
                        .threadEnding,
                        "thread \(id) is ending: no nested run starts, and every run under way returns"),
                    newLivelock: nil)
            }
            let depth = b.runStack.count
            if depth >= limits.maxNesting {
                return .refuse(
                    .depth,
                    .limit(
                        .nestingLimit,
                        "thread \(id) already has \(depth) runs under way, nested (limit \(limits.maxNesting), --max-nesting): this nested run was not started"
                    ), newLivelock: nil)
            }
            if b.stackLow != 0, here > b.stackLow, here - b.stackLow < UInt(Limits.stackReserveBytes) {
                return .refuse(
                    .stack,
                    .limit(
                        .nestingLimit,
                        "thread \(id) has \((here - b.stackLow) / 1024) KiB of stack left at depth \(depth), less than the \(Limits.stackReserveBytes / 1024) KiB a nested run needs: this nested run was not started"
                    ), newLivelock: nil)
            }
            if b.livelocked {
                return .refuse(.livelock, Self.livelockError(id, limits), newLivelock: nil)
            }
            guard depth > 1, let start = b.nestCPUStart else {
                // The first nested run of a nest: its CPU is counted from here.
                b.nestCPUStart = cpu
                return .admit
            }
            guard cpu - start > limits.maxNestCPUSeconds else { return .admit }
            b.livelocked = true
            return .refuse(.livelock, Self.livelockError(id, limits), newLivelock: (cpu - start, depth))
        }
        guard case .refuse(let reason, let error, let newLivelock) = admission else { return }
        diagnostics.countRefusal(reason)
        if let newLivelock {
            livelockFlag.store(true, ordering: .relaxed)
            diagnostics.countLivelock()
            warn(
                .livelock, severity: "warning", subjects: [id],
                message:
                    "\(id) spent \(ExitCause.seconds(newLivelock.cpu)) of CPU in nested runs (depth \(newLivelock.depth)) without getting back to its outermost run (budget \(ExitCause.seconds(limits.maxNestCPUSeconds)), --max-nest-cpu): its nested runs are stopped and new ones refused until its loop sleeps",
                details: [
                    "cpuSeconds": .number((newLivelock.cpu * 1000).rounded() / 1000),
                    "depth": .number(Double(newLivelock.depth)),
                    "budgetSeconds": .number(limits.maxNestCPUSeconds),
                ])
            // The innermost run returns after this turn; each run that returns
            // stops the one around it (`runFinished`), down to the outermost.
            if let loop = CFRunLoopGetCurrent() { CFRunLoopStop(loop) }
        } else if reason == .depth || reason == .stack {
            warn(
                .nestingLimit, severity: "warning", subjects: [id], message: error.message,
                details: ["limit": .number(Double(limits.maxNesting)), "reason": .string(reason.rawValue)])
        }
        throw error
    }

    private static func livelockError(_ id: String, _ limits: Limits) -> RunLoopError {
        .limit(
            .livelock,
            "thread \(id) is livelocked: its nested runs took more than \(ExitCause.seconds(limits.maxNestCPUSeconds)) of CPU back to back (--max-nest-cpu); no nested run starts until its loop sleeps in its outermost run"
        )
    }

    /// The refusal a `runNested` perform would meet now, checked when it is
    /// queued (any thread): a thread at its depth budget or livelocked
    /// refuses at once, so the caller gets the 429 and nothing is queued.
    public func checkNestingAdmission() throws(RunLoopError) {
        let (depth, livelocked) = book.withLock { ($0.runStack.count, $0.livelocked) }
        if livelocked {
            diagnostics.countRefusal(.livelock)
            throw Self.livelockError(id, limits)
        }
        guard depth >= limits.maxNesting else { return }
        diagnostics.countRefusal(.depth)
        throw .limit(
            .nestingLimit,
            "thread \(id) already has \(depth) runs under way, nested (limit \(limits.maxNesting), --max-nesting): a runNested perform would not start; nothing was queued"
        )
    }

    /// The loop is about to sleep: a livelocked thread that sleeps in its
    /// outermost run has left its nest behind.
    func loopSleptInBudget() {
        guard livelockFlag.load(ordering: .relaxed) else { return }
        let cleared = book.withLock { b -> Bool in
            guard b.livelocked, b.runStack.count <= 1 else { return false }
            b.livelocked = false
            b.nestCPUStart = nil
            return true
        }
        if cleared { livelockEnded() }
    }

    /// A run returned with `remaining` runs still under way, `livelocked` as
    /// the book had it (cleared there when the outermost run returned).
    func runFinishedInBudget(remaining: Int, wasLivelocked: Bool) {
        if wasLivelocked && remaining == 0 { livelockEnded() }
        if remaining <= 1 { unwarn(.nestingLimit, subject: id) }
    }

    private func livelockEnded() {
        livelockFlag.store(false, ordering: .relaxed)
        unwarn(.livelock, subject: id)
    }
}

/// The loop budgets' counts for one registry (for `/metrics`): nested runs
/// refused, by reason, and livelocks detected. Atomics, any thread.
final class NestingCounters: Sendable {
    private let depth = Atomic<Int>(0)
    private let stack = Atomic<Int>(0)
    private let livelock = Atomic<Int>(0)
    private let ending = Atomic<Int>(0)
    let livelocks = Atomic<Int>(0)

    init() {}

    func count(_ reason: Worker.NestRefusal) {
        switch reason {
        case .depth: depth.add(1, ordering: .relaxed)
        case .stack: stack.add(1, ordering: .relaxed)
        case .livelock: livelock.add(1, ordering: .relaxed)
        case .ending: ending.add(1, ordering: .relaxed)
        }
    }

    var refusals: [String: Int] {
        [
            "depth": depth.load(ordering: .relaxed), "stack": stack.load(ordering: .relaxed),
            "livelock": livelock.load(ordering: .relaxed), "ending": ending.load(ordering: .relaxed),
        ]
    }
}

extension LoopDiagnostics {
    func countRefusal(_ reason: Worker.NestRefusal) { nesting.count(reason) }
    func countLivelock() { nesting.livelocks.add(1, ordering: .relaxed) }

    /// Nested runs refused since start, by reason (`depth`, `stack`, `livelock`, `ending`).
    public var nestedRunsRefused: [String: Int] { nesting.refusals }
    /// Livelocks detected since start.
    public var livelocksDetected: Int { nesting.livelocks.load(ordering: .relaxed) }
    /// The reasons a nested run is refused, in a fixed order.
    public static var nestRefusalReasons: [String] { Worker.NestRefusal.allCases.map(\.rawValue) }
}
