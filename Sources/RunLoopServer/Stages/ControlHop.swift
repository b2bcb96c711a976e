import MicroHTTP
import Primitives
import RunLoopCore

extension RunLoopService {
    /// One request on its way to the control loop.
    struct Job: Sendable {
        let request: HTTPRequest
        /// Where its answer goes (its finisher, or a caller inside the process).
        let answer: Answerer
        /// The routes as the request found them (its snapshot's).
        let router: RouterResponder
        /// When it was posted (`Monotonic`): the control loop's wake-up latency.
        let postedAt: Double
    }
}

/// Stage 6 (HTTP thread → control loop): the hop. The job is appended to the
/// control loop's command buffer, its source signalled and its loop woken
/// (`ControlLoop.send`: `CFRunLoopSourceSignal` + `CFRunLoopWakeUp`); the
/// control loop's thread runs `RouterStage` on it. 503 when the queue is full.
/// With no control loop (`/api` closed: the guard stage answered already) the
/// request passes to the path's end.
struct ControlHop: RequestStage {
    /// `--max-queued-requests`, for the 503's message.
    let maxQueued: Int

    func handle(_ exchange: Exchange, next: (Exchange) -> StageResult) -> StageResult {
        // The guard stage answered 503 when /api is closed.
        guard let control = exchange.state.control else { return next(exchange) }
        let job = RunLoopService.Job(
            request: exchange.request, answer: .finisher(exchange.finisher), router: exchange.state.router,
            postedAt: Monotonic.now())
        guard control.send(job) else {
            return exchange.answer(
                APIResponses.error(
                    status: 503, code: .overloaded,
                    message: "\(maxQueued) requests are already queued for the control loop",
                    headers: [("Retry-After", "1")]))
        }
        return .handedOn
    }
}
