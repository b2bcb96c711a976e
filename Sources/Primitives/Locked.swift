#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A value behind a lock, reached only through closures: the one lock family
/// of runloopd (engine, HTTP layer and API alike).
///
/// Why not the standard library's `Synchronization.Mutex`: on Linux `Mutex`
/// is a futex word that ThreadSanitizer does not model, so `make test-tsan`
/// reports false races through it; a pthread mutex is understood. The mutex
/// is glibc's adaptive kind: a contended lock spins briefly before sleeping in
/// the kernel, which is what the request hot path wants (the HTTP thread and
/// the control loop take the command buffer's lock for a few instructions
/// each, many times per request; a plain mutex paid a futex wait and wake per
/// collision). A condition variable comes with it for the few waits
/// (a parked loop, a manual worker waiting for a run request).
///
/// Thread-safety: every method may be called from any thread; `body` runs
/// with the lock held and must not call back into the same `Locked`.
public final class Locked<Value>: @unchecked Sendable {
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    @usableFromInline var value: Value

    /// Wraps `value`.
    public init(_ value: Value) {
        self.value = value
        // One allocation for both: the mutex, then the condition (a lock is made
        // per perform on the hot path, so every malloc counts).
        let mutexBytes = MemoryLayout<pthread_mutex_t>.stride
        let alignment = max(MemoryLayout<pthread_mutex_t>.alignment, MemoryLayout<pthread_cond_t>.alignment)
        let conditionOffset = (mutexBytes + alignment - 1) / alignment * alignment
        let raw = UnsafeMutableRawPointer.allocate(
            byteCount: conditionOffset + MemoryLayout<pthread_cond_t>.stride, alignment: alignment)
        mutex = raw.bindMemory(to: pthread_mutex_t.self, capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        #if canImport(Glibc)
            pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP))
        #endif
        pthread_mutex_init(mutex, &attributes)
        pthread_mutexattr_destroy(&attributes)
        condition = (raw + conditionOffset).bindMemory(to: pthread_cond_t.self, capacity: 1)
        condition.initialize(to: pthread_cond_t())
        // The condition measures timed waits on the monotonic clock (a wall
        // clock step never stretches or cuts a deadline).
        var conditionAttributes = pthread_condattr_t()
        pthread_condattr_init(&conditionAttributes)
        pthread_condattr_setclock(&conditionAttributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &conditionAttributes)
        pthread_condattr_destroy(&conditionAttributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        condition.deinitialize(count: 1)
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        UnsafeMutableRawPointer(mutex).deallocate()
    }

    /// Runs `body` with the lock held (inlined, so it specialises in callers).
    @inlinable
    public func withLock<Result, Failure: Error>(
        _ body: (inout Value) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }

    /// Waits (lock released while asleep) until `ready` holds, then runs `body`
    /// with the lock held. Wakes on `notifyAll()`.
    public func withLock<Result, Failure: Error>(
        when ready: (Value) -> Bool, _ body: (inout Value) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while !ready(value) { pthread_cond_wait(condition, mutex) }
        return try body(&value)
    }

    /// Like `withLock(when:_:)`, but waits at most `seconds`: `body` then runs
    /// with the lock held either way and is told whether `ready` held.
    public func withLock<Result, Failure: Error>(
        when ready: (Value) -> Bool, timeout seconds: Double,
        _ body: (inout Value, _ isReady: Bool) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        let nanoseconds = Int(deadline.tv_nsec) + Int((min(max(seconds, 0), 1e8) * 1e9).rounded())
        deadline.tv_sec += nanoseconds / 1_000_000_000
        deadline.tv_nsec = nanoseconds % 1_000_000_000
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        var isReady = ready(value)
        while !isReady {
            let timedOut = pthread_cond_timedwait(condition, mutex, &deadline) == ETIMEDOUT
            isReady = ready(value)
            if timedOut { break }
        }
        return try body(&value, isReady)
    }

    /// Wakes every `withLock(when:)` waiter so it re-checks its condition. Call
    /// it after the change was made under the lock.
    public func notifyAll() {
        pthread_cond_broadcast(condition)
    }
}
