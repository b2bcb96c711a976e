import Foundation

/// Runs `work`, which blocks (a wait for a process, a child's start, a shell
/// command), on a thread of its own and awaits its result.
///
/// Swift's cooperative pool has one thread per core, two on the machines the
/// tests run on. A test that blocks one of them holds back every other test's
/// tasks, so under ThreadSanitizer a concurrent test could miss a 6 s window
/// it was polling for. Async tests wait through this instead.
public func offThePool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try work() }) }
    }
}

/// `offThePool` for work that cannot fail.
public func offThePool<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread.detachNewThread { continuation.resume(returning: work()) }
    }
}

extension ServerProcess {
    /// `stop(signal:grace:)` without holding a cooperative thread.
    public func stopped(signal: Int32 = SIGTERM, grace: Double = 5) async {
        await offThePool { self.stop(signal: signal, grace: grace) }
    }

    /// `waitForExit(timeout:)` without holding a cooperative thread.
    public func exited(timeout: Double) async -> Int32? {
        await offThePool { self.waitForExit(timeout: timeout) }
    }

    /// Waits without holding a cooperative thread until the collected output
    /// satisfies `predicate` or `timeout` seconds pass; returns whether it did.
    public func logged(timeout: Double, _ predicate: @escaping @Sendable (String) -> Bool) async -> Bool {
        await offThePool { self.output.wait(timeout: timeout) { predicate($0.log) } }
    }
}
