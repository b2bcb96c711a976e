import MicroHTTP
import Primitives
import RunLoopCore

/// Stage 7 (the control loop's thread): the router. Each job of a drained
/// batch, in arrival order: its route resolved (`RouterResponder`: 404, 405
/// with `Allow`), its handler run, and what the handler returns answered
/// through the job's finisher. A deferred handler answers the same way later,
/// from whichever thread its result arrives on.
struct RouterStage {
    let service: RunLoopService

    func run(_ job: RunLoopService.Job) {
        service.metrics.recordWakeup(seconds: Monotonic.now() - job.postedAt)
        let request = job.request
        // Queued before a stop began: answered, never acted on (no thread may
        // start once every worker is being ended).
        guard !service.stopping.load(ordering: .acquiring) else {
            job.answer(
                APIResponses.error(
                    status: 503, code: "shutting_down", message: "runloopd is stopping", headers: [("Retry-After", "1")]
                ),
                route: "unmatched")
            return
        }
        switch job.router.resolve(method: request.method, path: request.path) {
        case .matched(let route, let params):
            let context = RouteContext(request: request, params: params, answer: job.answer, route: route.template)
            Self.invoke(route.handler, context)
        case .notFound:
            job.answer(
                APIResponses.error(status: 404, code: "not_found", message: "no endpoint \(request.path)"),
                route: "unmatched")
        case .methodNotAllowed(let methods):
            let allow = methods.joined(separator: ", ")
            job.answer(
                APIResponses.error(
                    status: 405, code: "method_not_allowed",
                    message: "\(request.method) is not allowed on \(request.path); allowed: \(allow)",
                    headers: [("Allow", allow)]), route: "unmatched")
        }
    }

    /// Runs a handler and answers what it returns (a thrown error as its status).
    static func invoke(_ handler: RouteHandler, _ context: RouteContext) {
        let response: HTTPResponse
        do throws(RunLoopError) {
            switch try handler(context) {
            case .json(let status, let value, let headers):
                response = APIResponses.json(status, value, headers: headers)
            case .response(let ready): response = ready
            case .deferred: return
            }
        } catch {
            response = APIResponses.error(error)
        }
        context.answer(response, route: context.route)
    }
}
