import Dispatch
import Synchronization

/// A serial queue beside the control loop where slow answers are built
/// (predictions, journal exports), with how many requests wait on it or
/// run there now (`runloopd_offload_queued`). What waits is bounded by the
/// connection slots: each request holds one until it is answered.
final class OffloadQueue: Sendable {
    /// The queue's metric label (`predict`, `export`).
    let name: String
    private let queue: DispatchQueue
    private let held = Atomic<Int>(0)

    init(name: String, label: String) {
        self.name = name
        queue = DispatchQueue(label: label, qos: .utility)
    }

    /// Requests queued or running here now.
    var queued: Int { held.load(ordering: .relaxed) }

    /// Builds an answer on the queue, after everything queued before it,
    /// then delivers it: the request counts as queued until the answer is
    /// built, so whoever got the answer reads the gauge without it.
    func async<Answer: Sendable>(
        _ build: @escaping @Sendable () -> Answer, then deliver: @escaping @Sendable (Answer) -> Void
    ) {
        held.add(1, ordering: .relaxed)
        queue.async { [self] in
            let answer = build()
            held.subtract(1, ordering: .relaxed)
            deliver(answer)
        }
    }
}

/// The service's offload queues, one per kind of slow answer.
struct OffloadQueues: Sendable {
    /// Where predictions are played (`/predict`, `/why`): a long play never
    /// holds the other requests (the step bucket, `--max-predict-steps`,
    /// bounds its CPU).
    let predictions = OffloadQueue(name: "predict", label: "rl-predict")
    /// Where journal exports are built (`GET /api/journal`, up to
    /// `--max-export-bytes` parsed).
    let exports = OffloadQueue(name: "export", label: "rl-export")

    var all: [OffloadQueue] { [predictions, exports] }
}
