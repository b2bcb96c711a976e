import MicroHTTP
import Primitives

/// The control-loop side of the service: the control loop's command source
/// hands each drained batch of requests to `handle(_:server:path:)`, on its own thread.
extension RunLoopService {
    /// One batch of requests, in arrival order, on the control thread, each
    /// through `path` (`RequestPaths.control`); the connections their answers
    /// resume are resumed together at its end.
    static func handle(_ batch: [Job], server: HTTPServer?, path: StageResponder<Job>) {
        guard let server else {
            for job in batch { run(job, path) }
            return
        }
        server.withBatchedResumes {
            for job in batch { run(job, path) }
        }
    }

    /// One job through the control loop's path; an answer goes to the job's answerer.
    private static func run(_ job: Job, _ path: StageResponder<Job>) {
        if case .answer(let response, let route) = path.respond(job) { job.answer(response, route: route) }
    }
}
