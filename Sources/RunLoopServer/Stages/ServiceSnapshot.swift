import MicroHTTP
import RunLoopCore

/// The service's running state as one request sees it: read once, under one
/// lock, when the request arrives on the HTTP thread; every stage before the
/// hop reads this copy, and the job carries its router to the control loop.
struct ServiceSnapshot: Sendable {
    /// Nil until `start` has built it (and the service answers 503 until then).
    let requestGuard: RequestGuard?
    /// The control loop (nil before `start`).
    let loop: ControlLoop<RunLoopService.Job>?
    /// The routes, frozen at start.
    let router: RouterResponder
    /// The bearer token `/api` requires (nil: none).
    let token: String?
    /// `--setup` is being applied: `/api` and `/readyz` wait.
    let settingUp: Bool
    /// `start` has not finished yet.
    let starting: Bool
    /// SIGTERM's drain: `/readyz` answers 503.
    let draining: Bool
    /// The service accepts requests (start finished, stop not begun).
    let accepting: Bool

    /// The control loop, while it takes `/api` requests (not while starting,
    /// applying `--setup` or stopping).
    var control: ControlLoop<RunLoopService.Job>? { accepting && !settingUp ? loop : nil }
}

extension RunLoopService {
    /// The one look at `running` a request takes.
    func snapshot() -> ServiceSnapshot {
        running.withLock {
            ServiceSnapshot(
                requestGuard: $0.requestGuard, loop: $0.control,
                router: $0.router, token: $0.token, settingUp: $0.applyingSetup,
                starting: !$0.accepting && !$0.stopped, draining: $0.draining, accepting: $0.accepting)
        }
    }
}
