import Foundation

/// Starting the pthreads that own run loops (workers and the control loop):
/// a plain pthread, not a `Thread`, so the loop's thread is exactly what CF
/// sees and its name is what `/proc` shows.
enum LoopThread {
    /// Starts a thread running `main`; the thread is joinable (its owner joins it).
    /// `stackBytes` sizes its stack (nil: the system's default, `ulimit -s`).
    static func spawn(stackBytes: Int? = nil, _ main: @escaping @Sendable () -> Void) throws(RunLoopError) {
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        if let stackBytes {
            // Rounded up to whole pages, as pthread_attr_setstacksize wants.
            let page = max(4096, sysconf(Int32(_SC_PAGESIZE)))
            let size = (max(stackBytes, Int(PTHREAD_STACK_MIN)) + page - 1) / page * page
            let status = pthread_attr_setstacksize(&attributes, size)
            guard status == 0 else {
                throw RunLoopError.limit(
                    .threadCreateFailed,
                    "pthread_attr_setstacksize(\(size)) failed: \(String(cString: strerror(status)))")
            }
        }
        let box = Unmanaged.passRetained(Entry(main))
        var thread = pthread_t()
        let status = pthread_create(
            &thread, &attributes,
            { raw in
                guard let raw else { return nil }
                Unmanaged<Entry>.fromOpaque(raw).takeRetainedValue().main()
                return nil
            }, box.toOpaque())
        guard status == 0 else {
            box.release()
            throw RunLoopError.limit(
                .threadCreateFailed, "pthread_create failed: \(String(cString: strerror(status)))")
        }
    }

    /// What the new thread runs (a C thread entry cannot capture context).
    private final class Entry: Sendable {
        let main: @Sendable () -> Void
        init(_ main: @escaping @Sendable () -> Void) { self.main = main }
    }
}
