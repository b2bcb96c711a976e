import MicroHTTP
import CLinux
import CMicroHTTPD
import CoreFoundation
import Foundation
import Logging
import Primitives
import RunLoopCore
import RunLoopStore
import Synchronization

/// Draining, readiness and the graceful stop (ARCHITECTURE.md, "A stop that always ends").
extension RunLoopService {
    /// The bound of a graceful stop (seconds): SIGTERM exits within it, or the
    /// process's stop watchdog ends it shortly after.
    public static let stopBound: Double = 4

    public func stop(timeout: Double = RunLoopService.stopBound) {
        let (first, control, server) = running.withLock { r in
            defer {
                r.stopped = true
                r.accepting = false
            }
            return (!r.stopped, r.control, r.server)
        }
        guard first else { return }
        stopping.set()
        logger.info("runloopd stopping")
        let started = Monotonic.now()
        let deadline = started + timeout
        func left(keeping share: Double) -> Double { max(0, deadline - timeout * share - Monotonic.now()) }
        var metadata: Logger.Metadata = [:]
        var stepStarted = started
        func finished(_ step: String) {
            let now = Monotonic.now()
            metadata[step + "Seconds"] = .stringConvertible(Rep.rounded3(now - stepStarted))
            stepStarted = now
        }
        hub.closeAll()
        let results = registry.endAll(timeout: left(keeping: 0.5), origin: .serviceStopping)
        registry.diagnostics.shutdown()
        for (id, snapshot) in results {
            if let snapshot {
                let exit =
                    snapshot.lastExit.map { "\($0.reason.name) in \($0.mode) (\($0.cause?.code ?? "-"))" }
                    ?? "never ran"
                logger.info("thread ended", metadata: ["thread": "\(id)", "finalExit": "\(exit)"])
            } else {
                logger.warning("thread did not end in time (a handler is busy)", metadata: ["thread": "\(id)"])
            }
        }
        finished("threads")
        server?.stop(grace: left(keeping: 0.3))
        finished("http")
        for job in control?.stop(timeout: min(1, left(keeping: 0.2))) ?? [] {
            job.answer(
                APIResponses.error(status: 503, code: .shuttingDown, message: "runloopd is stopping"),
                route: "unmatched")
        }
        finished("control")
        // Last: the threads' final exits are queued by now; write them.
        history?.stop(timeout: max(timeout * 0.1, left(keeping: 0)))
        finished("store")
        let seconds = Monotonic.now() - started
        metadata["seconds"] = .stringConvertible(Rep.rounded3(seconds))
        if seconds > timeout {
            logger.warning("runloopd stopped later than its \(timeout) s bound", metadata: metadata)
        } else {
            logger.info("runloopd stopped", metadata: metadata)
        }
    }

    /// Starts the drain before a stop: from now on `/readyz` answers 503
    /// (`draining`) while everything else is served as before. Returns whether
    /// it began now (false: already draining, or stopped).
    @discardableResult
    public func beginDrain() -> Bool {
        running.withLock { r in
            guard !r.draining, !r.stopped else { return false }
            r.draining = true
            return true
        }
    }

    /// Whether SIGTERM's drain has begun.
    public var isDraining: Bool { running.withLock { $0.draining } }

    /// Whether the service takes requests (for `/readyz`).
    public var isReady: Bool {
        running.withLock { $0.accepting && ($0.control?.isRunning ?? false) }
    }
}
