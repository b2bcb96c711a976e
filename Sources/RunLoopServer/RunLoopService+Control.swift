import MicroHTTP
import CMicroHTTPD
import CoreFoundation
import Foundation
import Logging
import Primitives
import RunLoopCore

/// The control-loop side of the service: the control loop's command source
/// hands each drained batch of requests to `handle(_:)`, on its own thread.
extension RunLoopService {
    /// Whether the request carries the token: `Authorization: Bearer <token>`,
    /// or `?access_token=` on the event stream (for older clients; the
    /// dashboard sends the header). Compared in constant time.
    static func authorized(_ request: HTTPRequest, token: String) -> Bool {
        var presented: String?
        if let header = request.headers["authorization"] {
            let parts = header.split(separator: " ", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == "bearer" {
                presented = parts[1].trimmingCharacters(in: .whitespaces)
            }
        }
        if presented == nil, request.path == "/api/events" { presented = request.query["access_token"] }
        guard let presented else { return false }
        return constantTimeEqual(Array(presented.utf8), Array(token.utf8))
    }

    /// Compares without an early exit, so timing does not reveal a prefix.
    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var difference = UInt8(a.count == b.count ? 0 : 1)
        for index in 0..<max(a.count, b.count) {
            let x = index < a.count ? a[index] : 0
            let y = index < b.count ? b[index] : 0xFF
            difference |= x ^ y
        }
        return difference == 0
    }

    /// The control loop's command source perform routine: one batch of
    /// requests, in arrival order, on the control thread.
    func handle(_ batch: [Job]) {
        let (server, router) = running.withLock { ($0.server, $0.router) }
        guard let server else {
            for job in batch { dispatch(job, router) }
            return
        }
        server.withBatchedResumes {
            for job in batch { dispatch(job, router) }
        }
    }

    private func dispatch(_ job: Job, _ router: RouterResponder) {
        let request = job.request
        metrics.recordWakeup(seconds: Monotonic.now() - job.postedAt)
        guard isReady else {
            // Queued before a stop began: answered, but never acted on (no new
            // thread may start once every worker is being ended).
            job.respond(
                APIResponses.error(
                    status: 503, code: "shutting_down", message: "runloopd is stopping",
                    headers: [("Retry-After", "1")]))
            return
        }
        // Resolved once, first, so even a refused request is counted under its route.
        let match = router.resolve(method: request.method, path: request.path)
        if case .matched(let route, _) = match { job.trace.route = route.template }
        if let token = self.token, !job.trusted, !Self.authorized(request, token: token) {
            job.respond(
                APIResponses.error(
                    status: 401, code: "unauthorized",
                    message: "this runloopd needs a token: send Authorization: Bearer <token>",
                    headers: [("WWW-Authenticate", "Bearer realm=\"runloopd\"")]))
            return
        }
        if configuration.readOnly, !job.trusted, ["POST", "PUT", "PATCH", "DELETE"].contains(request.method) {
            job.respond(
                APIResponses.error(
                    status: 403, code: "read_only",
                    message: "this runloopd is read-only (--read-only): \(request.method) is refused"))
            return
        }
        if request.method == "POST" || request.method == "PUT" || request.method == "PATCH", !request.body.isEmpty {
            let type = request.headers["content-type"]?.lowercased() ?? ""
            guard type.hasPrefix("application/json") else {
                job.respond(
                    APIResponses.error(
                        status: 415, code: "unsupported_media_type",
                        message: "send the body as JSON with Content-Type: application/json"))
                return
            }
        }
        let (route, params): (Router.Route, [String: String])
        switch match {
        case .matched(let matched, let captured):
            (route, params) = (matched, captured)
        case .notFound:
            job.respond(APIResponses.error(status: 404, code: "not_found", message: "no endpoint \(request.path)"))
            return
        case .methodNotAllowed(let methods):
            let allow = methods.joined(separator: ", ")
            job.respond(
                APIResponses.error(
                    status: 405, code: "method_not_allowed",
                    message: "\(request.method) is not allowed on \(request.path); allowed: \(allow)",
                    headers: [("Allow", allow)]))
            return
        }
        let context = RouteContext(request: request, params: params, respond: job.respond)
        do throws(RunLoopError) {
            switch try route.handler(context) {
            case .json(let status, let value, let headers):
                job.respond(APIResponses.json(status, value, headers: headers))
            case .response(let response):
                job.respond(response)
            case .deferred:
                break
            }
        } catch {
            job.respond(APIResponses.error(error))
        }
    }
}
