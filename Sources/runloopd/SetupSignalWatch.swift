import CLinux
import Foundation
import Logging
import Primitives
import RunLoopServer

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A stop signal while `--setup` is applied. `RunLoopService.start` returns
/// only once the setup is (a perform with `waitUntilDone` may hold it for
/// minutes), and the main thread waits for signals only then: a SIGTERM
/// meanwhile would stay pending until the setup ended. This thread takes
/// SIGTERM and SIGINT meanwhile and stops the service; the stop answers the
/// setup's pending request, the start fails at once and runloopd exits.
/// `finish` (SIGUSR1, blocked in every thread as well) ends the watch; a
/// SIGHUP meanwhile stays pending for the main thread.
final class SetupSignalWatch: Sendable {
    /// The stop signal it took, if any.
    private let taken = Locked<Int32?>(nil)
    private let ended = Locked(false)

    /// Starts watching (the signals are blocked in every thread already).
    static func start(_ service: RunLoopService, json: Bool, logger: Logger) -> SetupSignalWatch {
        let watch = SetupSignalWatch()
        Thread { [watch] in
            _ = clinux_set_thread_name("rl-setup-watch")
            var set = sigset_t()
            sigemptyset(&set)
            for signal in [SIGTERM, SIGINT, SIGUSR1] { sigaddset(&set, signal) }
            var received: Int32 = 0
            while sigwait(&set, &received) != 0 {}
            if received != SIGUSR1 {
                watch.taken.withLock { $0 = received }
                logger.info(
                    "signal received while applying --setup: stopping",
                    metadata: ["signal": "\(received == SIGINT ? "SIGINT" : "SIGTERM")"])
                StopWatchdog.armForStop(bound: RunLoopService.stopBound, json: json)
                service.stop(timeout: RunLoopService.stopBound)
            }
            watch.ended.withLock { $0 = true }
            watch.ended.notifyAll()
        }.start()
        return watch
    }

    /// Ends the watch and waits for its thread (and the stop it made, if
    /// any); returns the stop signal it took.
    func finish() -> Int32? {
        if !ended.withLock({ $0 }) { kill(getpid(), SIGUSR1) }
        ended.withLock(when: { $0 }) { _ in }
        return taken.withLock { $0 }
    }
}
