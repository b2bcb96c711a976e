import MicroHTTP
import Primitives

/// The control-loop side of the service: the control loop's command source
/// hands each drained batch of requests to `handle(_:server:)`, on its own thread.
extension RunLoopService {
    /// One batch of requests, in arrival order, on the control thread; the
    /// connections their answers resume are resumed together at its end.
    func handle(_ batch: [Job], server: HTTPServer?) {
        let stage = RouterStage(service: self)
        guard let server else {
            for job in batch { stage.run(job) }
            return
        }
        server.withBatchedResumes {
            for job in batch { stage.run(job) }
        }
    }
}
