#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The connections waiting to be resumed at the end of a thread's
/// `withBatchedResumes` call (thread-local: only its own thread touches it).
final class ResumeBatch {
    var connections: [OpaquePointer] = []

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// The calling thread's open batch, if any.
    static var current: ResumeBatch? {
        get {
            pthread_getspecific(key).map { Unmanaged<ResumeBatch>.fromOpaque($0).takeUnretainedValue() }
        }
        set {
            // The setter's caller keeps the batch alive until it is cleared again.
            pthread_setspecific(key, newValue.map { Unmanaged.passUnretained($0).toOpaque() })
        }
    }
}
