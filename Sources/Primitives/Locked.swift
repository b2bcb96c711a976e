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
/// with the lock held and must not call back into the same `Locked`, nor run
/// foreign code (ARCHITECTURE.md, "Locks": collect under the lock, act after
/// it; the lock order).
///
/// Debug and test builds check that rule: the mutex is an error-checking one,
/// so a thread that takes a `Locked` it already holds stops the process with
/// a message naming the lock (where it was made) and both call sites, instead
/// of hanging the server; and each thread counts the locks it holds, so the
/// call-out points (`LockCheck.assertNoneHeld`) stop when reached under a lock.
/// Release builds keep the adaptive mutex and none of the bookkeeping.
///
/// Sendable only when `Value` is (swift-nio's `NIOLockedValueBox` rule): a
/// lock makes access exclusive, it cannot make a non-Sendable value safe to
/// hand to another thread.
public final class Locked<Value> {
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    @usableFromInline var value: Value
    #if DEBUG
        /// Where this lock was made (its name in re-entry messages).
        @usableFromInline let createdAt: LockSite
        /// Where the holder took it; read only by the holder.
        @usableFromInline var heldAt: LockSite?
    #endif

    /// Wraps `value`; `file` and `line` name the lock in debug builds' messages.
    public init(_ value: Value, file: StaticString = #fileID, line: UInt = #line) {
        self.value = value
        #if DEBUG
            createdAt = LockSite(file: file, line: line)
        #endif
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
        #if DEBUG
            pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ERRORCHECK))
        #elseif canImport(Glibc)
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
        file: StaticString = #fileID, line: UInt = #line, _ body: (inout Value) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        lock(file: file, line: line)
        defer { unlock() }
        return try body(&value)
    }

    /// Takes the mutex (debug builds: and checks the thread does not hold it already).
    @inlinable
    func lock(file: StaticString, line: UInt) {
        #if DEBUG
            let result = pthread_mutex_lock(mutex)
            if result == EDEADLK {
                LockCheck.reentered(created: createdAt, heldAt: heldAt, again: LockSite(file: file, line: line))
            }
            precondition(result == 0, "pthread_mutex_lock failed: \(result)")
            heldAt = LockSite(file: file, line: line)
            LockCheck.held(1)
        #else
            pthread_mutex_lock(mutex)
        #endif
    }

    /// Releases the mutex.
    @inlinable
    func unlock() {
        #if DEBUG
            heldAt = nil
            LockCheck.held(-1)
        #endif
        pthread_mutex_unlock(mutex)
    }

    /// Blocks in the condition (the mutex released meanwhile); true when it timed out.
    @discardableResult
    private func wait(until deadline: UnsafePointer<timespec>?) -> Bool {
        #if DEBUG
            let site = heldAt
            heldAt = nil
        #endif
        let timedOut: Bool
        if let deadline {
            timedOut = pthread_cond_timedwait(condition, mutex, deadline) == ETIMEDOUT
        } else {
            pthread_cond_wait(condition, mutex)
            timedOut = false
        }
        #if DEBUG
            heldAt = site
        #endif
        return timedOut
    }

    /// Waits (lock released while asleep) until `ready` holds, then runs `body`
    /// with the lock held. Wakes on `notifyAll()`.
    public func withLock<Result, Failure: Error>(
        file: StaticString = #fileID, line: UInt = #line, when ready: (Value) -> Bool,
        _ body: (inout Value) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        lock(file: file, line: line)
        defer { unlock() }
        while !ready(value) { wait(until: nil) }
        return try body(&value)
    }

    /// Like `withLock(when:_:)`, but waits at most `seconds`: `body` then runs
    /// with the lock held either way and is told whether `ready` held.
    public func withLock<Result, Failure: Error>(
        file: StaticString = #fileID, line: UInt = #line, when ready: (Value) -> Bool, timeout seconds: Double,
        _ body: (inout Value, _ isReady: Bool) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        let nanoseconds = Int(deadline.tv_nsec) + Int((min(max(seconds, 0), 1e8) * 1e9).rounded())
        deadline.tv_sec += nanoseconds / 1_000_000_000
        deadline.tv_nsec = nanoseconds % 1_000_000_000
        lock(file: file, line: line)
        defer { unlock() }
        var isReady = ready(value)
        while !isReady {
            let timedOut = wait(until: &deadline)
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

/// A place in the source (a lock's making, or where it was taken).
public struct LockSite: Sendable, CustomStringConvertible {
    @usableFromInline let file: StaticString
    @usableFromInline let line: UInt

    @usableFromInline init(file: StaticString, line: UInt) {
        self.file = file
        self.line = line
    }

    public var description: String { "\(file):\(line)" }
}

/// Debug builds' checks of the lock rule: how many `Locked` the calling
/// thread holds (a thread-local count), and the stop on a re-entered lock.
/// Release builds compile every check away.
public enum LockCheck {
    #if DEBUG
        /// The per-thread count of held locks (a pthread key: no Foundation, no lock).
        private static let key: pthread_key_t = {
            var key = pthread_key_t()
            pthread_key_create(&key, nil)
            return key
        }()

        /// Adds `delta` to the calling thread's count of held locks.
        @usableFromInline static func held(_ delta: Int) {
            let count = Int(bitPattern: pthread_getspecific(key)) + delta
            pthread_setspecific(key, UnsafeRawPointer(bitPattern: count))
        }

        /// The calling thread took a lock it already holds: stop, naming both sites.
        @usableFromInline static func reentered(created: LockSite, heldAt: LockSite?, again: LockSite) -> Never {
            fatalError(
                "lock re-entered: the Locked made at \(created), held since \(heldAt.map { "\($0)" } ?? "?"), "
                    + "taken again at \(again) by the same thread (a call-out under its lock)")
        }
    #endif

    /// How many `Locked` the calling thread holds (always 0 in release builds).
    public static var heldCount: Int {
        #if DEBUG
            Int(bitPattern: pthread_getspecific(key))
        #else
            0
        #endif
    }

    /// A call-out point (a handler, a close handler, a resume, a publish, a
    /// log line) must be reached with no lock held: debug builds stop here
    /// when it is not, naming `what` and the call site.
    @inlinable
    public static func assertNoneHeld(
        _ what: @autoclosure () -> String, file: StaticString = #fileID, line: UInt = #line
    ) {
        #if DEBUG
            let count = heldCount
            if count != 0 {
                fatalError("\(what()) at \(file):\(line) reached while this thread holds \(count) lock(s)")
            }
        #endif
    }
}

// @unchecked: the mutex serialises every access to `value`; the compiler
// cannot see that through the pthread calls.
extension Locked: @unchecked Sendable where Value: Sendable {}
