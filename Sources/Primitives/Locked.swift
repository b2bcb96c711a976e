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
///
/// One allocation (swift-nio's `NIOLockedValueBox` shape): `Locked` is a
/// handle on a `LockedBuffer`, a `ManagedBuffer` whose header is the value
/// and whose tail is the mutex and the condition. A type that is a lock and
/// its state at once (one per request) subclasses `LockedBuffer` instead and
/// costs no allocation of its own for the lock (`HTTPRequestContext`).
/// Every pthread call is checked, in release builds too (swift-nio's
/// `NIOLock` rule): a failing lock or unlock stops the process rather than
/// run a body unguarded.
public struct Locked<Value> {
    @usableFromInline let buffer: LockedBuffer<Value>

    /// Wraps `value`; `file` and `line` name the lock in debug builds' messages.
    public init(_ value: Value, file: StaticString = #fileID, line: UInt = #line) {
        buffer = LockedBuffer.make(value, file: file, line: line)
    }

    /// Runs `body` with the lock held (inlined, so it specialises in callers).
    @inlinable
    public func withLock<Result, Failure: Error>(
        file: StaticString = #fileID, line: UInt = #line, _ body: (inout Value) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        try buffer.withLock(file: file, line: line, body)
    }

    /// Waits (lock released while asleep) until `ready` holds, then runs `body`
    /// with the lock held. Wakes on `notifyAll()`.
    public func withLock<Result, Failure: Error>(
        file: StaticString = #fileID, line: UInt = #line, when ready: (Value) -> Bool,
        _ body: (inout Value) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        try buffer.withLock(file: file, line: line, when: ready, body)
    }

    /// Like `withLock(when:_:)`, but waits at most `seconds`: `body` then runs
    /// with the lock held either way and is told whether `ready` held.
    public func withLock<Result, Failure: Error>(
        file: StaticString = #fileID, line: UInt = #line, when ready: (Value) -> Bool, timeout seconds: Double,
        _ body: (inout Value, _ isReady: Bool) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        try buffer.withLock(file: file, line: line, when: ready, timeout: seconds, body)
    }

    /// Wakes every `withLock(when:)` waiter so it re-checks its condition. Call
    /// it after the change was made under the lock.
    public func notifyAll() { buffer.notifyAll() }
}

/// A mutex and its condition: the tail of a `LockedBuffer`, never moved.
public struct LockPrimitives {
    @usableFromInline var mutex = pthread_mutex_t()
    @usableFromInline var condition = pthread_cond_t()
    #if DEBUG
        /// Where this lock was made (its name in re-entry messages).
        @usableFromInline var createdAt: LockSite
        /// Where the holder took it; read only by the holder.
        @usableFromInline var heldAt: LockSite?
    #endif

    init(file: StaticString, line: UInt) {
        #if DEBUG
            createdAt = LockSite(file: file, line: line)
        #endif
    }
}

/// A value (the header) and its lock (the tail: `LockPrimitives`) in one
/// object. `Locked` is the handle most code holds; a type that is itself a
/// lock and its state subclasses this one (final) and is made with `make`.
///
/// Thread-safety: as `Locked`'s; the header is reached only under the lock,
/// through `withLock`, except parts a subclass never changes after `make`.
open class LockedBuffer<Header>: ManagedBuffer<Header, LockPrimitives> {
    /// A buffer of the caller's class holding `header`, its lock initialised.
    public final class func make(_ header: Header, file: StaticString = #fileID, line: UInt = #line) -> Self {
        let buffer = unsafeDowncast(create(minimumCapacity: 1) { _ in header }, to: self)
        buffer.withUnsafeMutablePointerToElements { lock in
            lock.initialize(to: LockPrimitives(file: file, line: line))
            var attributes = pthread_mutexattr_t()
            checked(pthread_mutexattr_init(&attributes), "pthread_mutexattr_init")
            #if DEBUG
                let kind = Int32(PTHREAD_MUTEX_ERRORCHECK)
            #elseif canImport(Glibc)
                let kind = Int32(PTHREAD_MUTEX_ADAPTIVE_NP)
            #else
                let kind = Int32(PTHREAD_MUTEX_DEFAULT)
            #endif
            checked(pthread_mutexattr_settype(&attributes, kind), "pthread_mutexattr_settype")
            checked(pthread_mutex_init(&lock.pointee.mutex, &attributes), "pthread_mutex_init")
            checked(pthread_mutexattr_destroy(&attributes), "pthread_mutexattr_destroy")
            // The condition measures timed waits on the monotonic clock (a wall
            // clock step never stretches or cuts a deadline).
            var conditionAttributes = pthread_condattr_t()
            checked(pthread_condattr_init(&conditionAttributes), "pthread_condattr_init")
            checked(pthread_condattr_setclock(&conditionAttributes, CLOCK_MONOTONIC), "pthread_condattr_setclock")
            checked(pthread_cond_init(&lock.pointee.condition, &conditionAttributes), "pthread_cond_init")
            checked(pthread_condattr_destroy(&conditionAttributes), "pthread_condattr_destroy")
        }
        return buffer
    }

    deinit {
        withUnsafeMutablePointerToElements { lock in
            Self.checked(pthread_cond_destroy(&lock.pointee.condition), "pthread_cond_destroy")
            Self.checked(pthread_mutex_destroy(&lock.pointee.mutex), "pthread_mutex_destroy")
            _ = lock.deinitialize(count: 1)
        }
    }

    /// Stops the process when a pthread call failed (every build).
    @inlinable
    static func checked(_ result: Int32, _ call: StaticString) {
        precondition(result == 0, "\(call) failed: \(result)")
    }

    /// Runs `body` with the lock held on the header (inlined, so it specialises in callers).
    @inlinable
    public final func withLock<Result, Failure: Error>(
        file: StaticString = #fileID, line: UInt = #line, _ body: (inout Header) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        try withUnsafeMutablePointers { (header, lock) throws(Failure) -> Result in
            Self.lock(lock, file: file, line: line)
            defer { Self.unlock(lock) }
            return try body(&header.pointee)
        }
    }

    /// Takes the mutex (debug builds: and checks the thread does not hold it already).
    @inlinable
    static func lock(_ lock: UnsafeMutablePointer<LockPrimitives>, file: StaticString, line: UInt) {
        let result = pthread_mutex_lock(&lock.pointee.mutex)
        #if DEBUG
            if result == EDEADLK {
                LockCheck.reentered(
                    created: lock.pointee.createdAt, heldAt: lock.pointee.heldAt,
                    again: LockSite(file: file, line: line))
            }
        #endif
        checked(result, "pthread_mutex_lock")
        #if DEBUG
            lock.pointee.heldAt = LockSite(file: file, line: line)
            LockCheck.held(1)
        #endif
    }

    /// Releases the mutex.
    @inlinable
    static func unlock(_ lock: UnsafeMutablePointer<LockPrimitives>) {
        #if DEBUG
            lock.pointee.heldAt = nil
            LockCheck.held(-1)
        #endif
        checked(pthread_mutex_unlock(&lock.pointee.mutex), "pthread_mutex_unlock")
    }

    /// Blocks in the condition (the mutex released meanwhile); true when it timed out.
    @discardableResult
    private static func wait(_ lock: UnsafeMutablePointer<LockPrimitives>, until deadline: UnsafePointer<timespec>?)
        -> Bool
    {
        #if DEBUG
            let site = lock.pointee.heldAt
            lock.pointee.heldAt = nil
            defer { lock.pointee.heldAt = site }
        #endif
        guard let deadline else {
            checked(pthread_cond_wait(&lock.pointee.condition, &lock.pointee.mutex), "pthread_cond_wait")
            return false
        }
        let result = pthread_cond_timedwait(&lock.pointee.condition, &lock.pointee.mutex, deadline)
        if result == ETIMEDOUT { return true }
        checked(result, "pthread_cond_timedwait")
        return false
    }

    /// Waits (lock released while asleep) until `ready` holds, then runs `body`
    /// with the lock held. Wakes on `notifyAll()`.
    public final func withLock<Result, Failure: Error>(
        file: StaticString = #fileID, line: UInt = #line, when ready: (Header) -> Bool,
        _ body: (inout Header) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        try withUnsafeMutablePointers { (header, lock) throws(Failure) -> Result in
            Self.lock(lock, file: file, line: line)
            defer { Self.unlock(lock) }
            while !ready(header.pointee) { Self.wait(lock, until: nil) }
            return try body(&header.pointee)
        }
    }

    /// Like `withLock(when:_:)`, but waits at most `seconds`: `body` then runs
    /// with the lock held either way and is told whether `ready` held.
    public final func withLock<Result, Failure: Error>(
        file: StaticString = #fileID, line: UInt = #line, when ready: (Header) -> Bool, timeout seconds: Double,
        _ body: (inout Header, _ isReady: Bool) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        let nanoseconds = Int(deadline.tv_nsec) + Int((min(max(seconds, 0), 1e8) * 1e9).rounded())
        deadline.tv_sec += nanoseconds / 1_000_000_000
        deadline.tv_nsec = nanoseconds % 1_000_000_000
        return try withUnsafeMutablePointers { (header, lock) throws(Failure) -> Result in
            Self.lock(lock, file: file, line: line)
            defer { Self.unlock(lock) }
            var isReady = ready(header.pointee)
            while !isReady {
                let timedOut = Self.wait(lock, until: &deadline)
                isReady = ready(header.pointee)
                if timedOut { break }
            }
            return try body(&header.pointee, isReady)
        }
    }

    /// Wakes every `withLock(when:)` waiter so it re-checks its condition.
    public final func notifyAll() {
        withUnsafeMutablePointerToElements { lock in
            Self.checked(pthread_cond_broadcast(&lock.pointee.condition), "pthread_cond_broadcast")
        }
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
