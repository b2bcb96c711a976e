import MicroHTTP
import Primitives
import RunLoopCore

/// Stage 7 (the control loop's thread): the router. Each job of a drained
/// batch, in arrival order: its route resolved (`RouterResponder`: 405 with
/// `Allow`; a path no template matches goes on to the path's end, 404), its
/// handler run, and what the handler returns answered through the job's
/// answerer. A deferred handler answers the same way later, from whichever
/// thread its result arrives on.
struct RouterStage: RequestStage {
    func handle(_ job: RunLoopService.Job, next: (RunLoopService.Job) -> StageResult) -> StageResult {
        let request = job.request
        switch job.router.resolve(method: request.method, path: request.path) {
        case .matched(let route, let params):
            let context = RouteContext(request: request, params: params, answer: job.answer, route: route.template)
            return Self.invoke(route.handler, context)
        case .notFound:
            return next(job)
        case .methodNotAllowed(let methods):
            let allow = methods.joined(separator: ", ")
            return .answer(
                APIResponses.error(
                    status: 405, code: .methodNotAllowed,
                    message: "\(request.method) is not allowed on \(request.path); allowed: \(allow)",
                    headers: [("Allow", allow)]), route: "unmatched")
        }
    }

    /// The end of the control loop's path: no route's template matches the path.
    static func notFound(_ job: RunLoopService.Job) -> StageResult {
        .answer(
            APIResponses.error(status: 404, code: .notFound, message: "no endpoint \(job.request.path)"),
            route: "unmatched")
    }

    /// Runs a handler: what it returns (a thrown error as its status) is the
    /// answer, under the route's template; a deferred reply is handed on.
    static func invoke(_ handler: RouteHandler, _ context: RouteContext) -> StageResult {
        let response: HTTPResponse
        do throws(RunLoopError) {
            switch try handler(context) {
            case .json(let status, let value, let headers):
                response = APIResponses.json(status, value, headers: headers)
            case .response(let ready): response = ready
            case .deferred: return .handedOn
            }
        } catch {
            response = APIResponses.error(error)
        }
        return .answer(response, route: context.route)
    }
}
