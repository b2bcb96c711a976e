import MicroHTTP
import Primitives
import RunLoopCore
import Synchronization

/// Set once when the service's stop begins; read by the control loop's gate.
final class StopFlag: Sendable {
    private let flag = Atomic<Bool>(false)

    /// Whether the stop has begun.
    var isSet: Bool { flag.load(ordering: .acquiring) }
    /// The stop begins.
    func set() { flag.store(true, ordering: .releasing) }
}

/// Stage 6½ (the control loop's thread, before the router): the job's
/// wake-up latency is counted (posted → drained), and a job queued before a
/// stop began is answered 503, never acted on (no thread may start once every
/// worker is being ended).
struct ControlGate: RequestStage {
    let metrics: ServiceMetrics
    let stopping: StopFlag

    func handle(_ job: RunLoopService.Job, next: (RunLoopService.Job) -> StageResult) -> StageResult {
        metrics.recordWakeup(seconds: Monotonic.now() - job.postedAt)
        guard !stopping.isSet else {
            return .answer(
                APIResponses.error(
                    status: 503, code: .shuttingDown, message: "runloopd is stopping", headers: [("Retry-After", "1")]
                ),
                route: "unmatched")
        }
        return next(job)
    }
}
