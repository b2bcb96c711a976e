#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A pthread mutex of glibc's adaptive kind: a contended `lock()` spins
/// briefly before it sleeps in the kernel.
///
/// For the locks two threads take for a few instructions each, many times per
/// request (a command buffer's append and drain): with `NSLock`'s plain mutex
/// every collision cost a futex wait on one side and a futex wake on the
/// other. Still a pthread mutex, so ThreadSanitizer understands it.
public final class AdaptiveLock: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    /// Creates an unlocked lock.
    public init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        #if canImport(Glibc)
            pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP))
        #endif
        pthread_mutex_init(mutex, &attributes)
        pthread_mutexattr_destroy(&attributes)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Takes the lock.
    public func lock() { pthread_mutex_lock(mutex) }

    /// Releases the lock.
    public func unlock() { pthread_mutex_unlock(mutex) }

    /// Runs `body` with the lock held.
    @inlinable
    public func withLock<Result>(_ body: () throws -> Result) rethrows -> Result {
        lock()
        defer { unlock() }
        return try body()
    }
}
