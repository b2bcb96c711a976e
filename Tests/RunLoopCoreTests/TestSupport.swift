import CoreFoundation
import Foundation
import RunLoopTestSupport
import Testing

@testable import RunLoopCore

/// Records every event of one registry and lets a test block until a condition
/// holds. The wait is woken by each event and re-checks at least every 20 ms
/// (for state read through snapshots); it never runs past its deadline. No test
/// sleeps.
final class Probe: @unchecked Sendable {
    private let recorded = Monitor<[RunLoopEvent]>([])

    /// The registry's event sink.
    func record(_ event: RunLoopEvent) {
        recorded.update { $0.append(event) }
    }

    /// Every event so far, in the order they were delivered.
    var events: [RunLoopEvent] { recorded.value }

    /// Blocks until `predicate` is true or `seconds` pass; returns the last
    /// evaluation. The predicate runs without the probe's lock held.
    @discardableResult
    func waitUntil(_ seconds: Double = 10, _ predicate: () -> Bool) -> Bool {
        recorded.wait(timeout: seconds, recheckEvery: 0.02, until: predicate)
    }

    /// Task events (`added`, `started`, `ran`, `finished`, …) of `thread`, in order.
    func taskChanges(_ thread: String) -> [(task: String, change: String)] {
        events.compactMap {
            guard case .task(let tid, let task, let change, _) = $0, tid == thread else { return nil }
            return (task, change.rawValue)
        }
    }

    /// Perform results delivered as events for `performId`.
    func performResults(_ performId: String) -> [PerformResult] {
        events.compactMap {
            guard case .perform(_, let result) = $0, result.performId == performId else { return nil }
            return result
        }
    }

    /// Thread events of `thread` with `change` (`parked`, `unparked`, `exited`, …).
    func threadChanges(_ thread: String, _ change: String) -> Int {
        events.filter {
            guard case .thread(let snapshot, let what) = $0 else { return false }
            return snapshot.id == thread && what.rawValue == change
        }.count
    }
}

extension Mailbox {
    /// The first value, waiting up to `seconds` for it (nil if none came).
    func wait(_ seconds: Double = 10) -> Value? { first(timeout: seconds) }

    /// The first `count` values, waiting up to `seconds` for them (fewer if they
    /// did not all come).
    func wait(count: Int, _ seconds: Double = 10) -> [Value] { prefix(count, timeout: seconds) }
}

/// A registry of its own (tests run in parallel) with a probe on its events.
func makeRegistry(_ limits: Limits = Limits()) -> (WorkerRegistry, Probe) {
    let probe = Probe()
    let registry = WorkerRegistry(limits: limits) { probe.record($0) }
    return (registry, probe)
}

/// Runs `body` on a new worker with `workerOptions`, in a registry of its own
/// that ends every worker after.
func withWorker(_ workerOptions: WorkerOptions, _ body: (Worker) throws -> Void) throws {
    let (registry, _) = makeRegistry()
    defer { registry.endAll() }
    try body(try registry.createWorker(workerOptions))
}

/// Options for a worker in `style` with `keepAlive`.
func options(
    _ style: RunStyle, keepAlive: KeepAlive = .port, mode: RunLoopMode = .default, seconds: Double = 30,
    returnAfterSourceHandled: Bool = false, name: String? = nil
) -> WorkerOptions {
    WorkerOptions(
        name: name, keepAlive: keepAlive,
        policy: RunPolicy(
            style: style, mode: mode, seconds: seconds, returnAfterSourceHandled: returnAfterSourceHandled))
}

extension Worker {
    /// Starts one run of a manual worker; the returned value gets its result.
    func startRun(
        _ mode: RunLoopMode = .default, seconds: Double, returnAfterSourceHandled: Bool = false
    ) throws -> Mailbox<Result<RunExit, RunLoopError>> {
        let result = Mailbox<Result<RunExit, RunLoopError>>()
        try run(mode: mode, seconds: seconds, returnAfterSourceHandled: returnAfterSourceHandled) { result.put($0) }
        return result
    }

    /// Runs a manual worker once and waits for the run's exit.
    func runAndWait(
        _ mode: RunLoopMode = .default, seconds: Double, returnAfterSourceHandled: Bool = false
    ) throws -> RunExit {
        let pending = try startRun(mode, seconds: seconds, returnAfterSourceHandled: returnAfterSourceHandled)
        let result = try #require(pending.wait(seconds + 15), "the run never returned")
        return try result.get()
    }

    /// `stop`, waiting for the reply.
    func stopAndWait(atEntry: Bool = false) throws -> Result<RunExit, RunLoopError> {
        let pending = Mailbox<Result<RunExit, RunLoopError>>()
        stop(atEntry: atEntry) { pending.put($0) }
        return try #require(pending.wait(), "stop never replied")
    }

    /// Queues a perform; the returned value gets its (first) answer.
    func performCall(
        _ selector: String, _ args: [String: Value] = [:], modes: [RunLoopMode]? = nil, afterDelay: Double? = nil,
        timeout: Double? = nil
    ) throws -> (id: String, result: Mailbox<PerformResult>) {
        let result = Mailbox<PerformResult>()
        let id = try perform(
            PerformSpec(call: SelectorCall(selector: selector, args: args), modes: modes, afterDelay: afterDelay),
            deadline: timeout.map { .caller($0) }
        ) { result.put($0) }
        return (id, result)
    }

    /// The sources a user added (not the keep-alive port).
    func userSources() -> [SourceSnapshot] { sourceSnapshots().filter { $0.role == .user } }

    /// The activities recorded by user observers, oldest first.
    var activityNames: [Activity] { activities().map(\.activity) }
}

/// The value of a perform that succeeded (fails the test otherwise).
func value(_ pending: Mailbox<PerformResult>, _ seconds: Double = 10) throws -> Value {
    let result = try #require(pending.wait(seconds), "the perform was never answered")
    return try result.outcome.get()
}

/// The error a throwing call raised, as a `RunLoopError`.
func runLoopError(_ body: () throws -> Void) -> RunLoopError? {
    do {
        try body()
        return nil
    } catch let error as RunLoopError {
        return error
    } catch {
        Issue.record("unexpected error \(error)")
        return nil
    }
}

/// The names (`comm`) of this process's threads.
func threadNames() -> [String] {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
    return tasks.compactMap { tid in
        (try? String(contentsOfFile: "/proc/self/task/\(tid)/comm", encoding: .utf8))?
            .trimmingCharacters(in: .newlines)
    }
}

/// Open eventfd, epoll and timerfd descriptors: what a CF run loop and a port
/// source are made of. Pipes and sockets (which end-to-end suites running in
/// parallel open by the hundred) are not counted.
func runLoopDescriptorCount() -> Int {
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    return entries.filter { entry in
        guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(entry)") else {
            return false
        }
        return target.hasPrefix("anon_inode:[eventfd]") || target.hasPrefix("anon_inode:[eventpoll]")
            || target.hasPrefix("anon_inode:[timerfd]")
    }.count
}

/// A short random tag to make names unique across parallel tests.
func uniqueTag() -> String {
    String(UInt32.random(in: 0x1000_0000...0xffff_ffff), radix: 16)
}

extension Result where Failure == RunLoopError {
    /// The error's code, when this is a failure.
    var errorCode: String? {
        if case .failure(let error) = self { return error.code }
        return nil
    }
}

extension CallerDeadline {
    /// What an API caller's deadline answers: `deadline_exceeded`, the perform
    /// staying queued.
    static func caller(_ seconds: Double) -> CallerDeadline {
        CallerDeadline(seconds: seconds) { performId in
            RunLoopError(
                kind: .deadline, code: .deadlineExceeded,
                message: "perform \(performId) did not finish within \(seconds) s; it stays pending")
        }
    }
}
