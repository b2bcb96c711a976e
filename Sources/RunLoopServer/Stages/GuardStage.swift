import MicroHTTP
import Primitives

/// Stage 1 (HTTP thread): a foreign Host or Origin changes nothing
/// (`RequestGuard`), a CORS preflight from an allowed origin is answered, and
/// `/api` waits (503) while the service starts, applies `--setup` or stops.
struct GuardStage: RequestStage {
    func handle(_ exchange: Exchange, next: (Exchange) -> StageResult) -> StageResult {
        let request = exchange.request
        guard let requestGuard = exchange.state.requestGuard else {
            return exchange.answer(Self.unavailable(code: .shuttingDown, "runloopd is not accepting requests"))
        }
        let origin = request.headers["origin"]
        // An event stream holds a place in the stream budget: a foreign page may not take one.
        let verdict = requestGuard.check(
            method: request.method, host: request.headers["host"], origin: origin, referer: request.headers["referer"],
            scheme: RequestGuard.scheme(forwardedProto: request.headers["x-forwarded-proto"]),
            guardsRead: request.path == "/api/events")
        if case .refuse(let status, let code, let message, let field) = verdict {
            return exchange.answer(
                APIResponses.refusal(
                    HTTPRefusal(
                        status: status, code: code, message: message, field: field,
                        headers: [("Cache-Control", "no-store")])))
        }
        guard exchange.isAPI else { return next(exchange) }
        if request.method == "OPTIONS", let origin, request.headers["access-control-request-method"] != nil {
            // The guard refused the other origins; preflights never carry the token.
            return exchange.answer(HTTPResponse(status: 204, headers: requestGuard.preflightHeaders(origin: origin)))
        }
        return exchange.state.control == nil ? exchange.answer(Self.notOpen(exchange.state)) : next(exchange)
    }

    /// Why `/api` is closed (`accepting` is true only while the control loop runs).
    static func notOpen(_ state: ServiceSnapshot) -> HTTPResponse {
        if state.settingUp { return unavailable(code: .notReady, "runloopd is applying its --setup") }
        if state.starting { return unavailable(code: .notReady, "runloopd is starting") }
        return unavailable(code: .shuttingDown, "runloopd is not accepting requests")
    }

    static func unavailable(code: ErrorCode, _ message: String) -> HTTPResponse {
        APIResponses.error(status: 503, code: code, message: message, headers: [("Retry-After", "1")])
    }
}
