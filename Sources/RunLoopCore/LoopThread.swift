import Foundation

/// Starting the pthreads that own run loops (workers and the control loop):
/// a plain pthread, not a `Thread`, so the loop's thread is exactly what CF
/// sees and its name is what `/proc` shows.
enum LoopThread {
    /// Starts a thread running `main`; the thread is joinable (its owner joins it).
    static func spawn(_ main: @escaping @Sendable () -> Void) throws(RunLoopError) {
        let box = Unmanaged.passRetained(Entry(main))
        var thread = pthread_t()
        let status = pthread_create(
            &thread, nil,
            { raw in
                guard let raw else { return nil }
                Unmanaged<Entry>.fromOpaque(raw).takeRetainedValue().main()
                return nil
            }, box.toOpaque())
        guard status == 0 else {
            box.release()
            throw RunLoopError.limit(
                "thread_create_failed", "pthread_create failed: \(String(cString: strerror(status)))")
        }
    }

    /// What the new thread runs (a C thread entry cannot capture context).
    private final class Entry: Sendable {
        let main: @Sendable () -> Void
        init(_ main: @escaping @Sendable () -> Void) { self.main = main }
    }
}
