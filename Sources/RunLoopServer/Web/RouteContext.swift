import MicroHTTP
import RunLoopCore

/// What a route handler answers.
enum Reply {
    /// A JSON body with a status.
    case json(Int, Value, headers: [(String, String)] = [])
    /// A ready response (event streams, raw documents).
    case response(HTTPResponse)
    /// The handler has arranged to call `RouteContext.respond` later (long
    /// waits); the answer still goes through the same finisher.
    case deferred
}

/// One request as a route handler sees it.
struct RouteContext: Sendable {
    let request: HTTPRequest
    let params: [String: String]
    /// Where the answer goes.
    let answer: Answerer
    /// The route's template (the metrics label of the answer).
    let route: String

    init(request: HTTPRequest, params: [String: String], answer: Answerer, route: String) {
        self.request = request
        self.params = params
        self.answer = answer
        self.route = route
    }

    /// A request from inside the process, answered to `respond`.
    init(request: HTTPRequest, params: [String: String], respond: @escaping @Sendable (HTTPResponse) -> Void) {
        self.init(request: request, params: params, answer: .caller(respond), route: "")
    }

    /// Answers the request (a second answer is dropped by the HTTP layer).
    /// A closure only for the handlers that keep it (deferred answers).
    var respond: @Sendable (HTTPResponse) -> Void { { [answer, route] in answer($0, route: route) } }

    /// The path's `{name}` capture. A name the route's template does not
    /// capture is a handler's mistake: it throws (`no_capture`, 404) rather
    /// than answer as if the path had held an empty id.
    func param(_ name: String) throws(RunLoopError) -> String {
        guard let value = params[name] else {
            throw RunLoopError(
                kind: .notFound, code: .noCapture, message: "the route \(route) captures no {\(name)}", field: name)
        }
        return value
    }

    /// Parses the body, accepting only `allowed` fields.
    func body(_ allowed: Set<String>) throws(RunLoopError) -> Body {
        try Body(request.body, allowed: allowed)
    }

    /// Answers a deferred reply with JSON.
    func reply(_ status: Int, _ value: Value, headers: [(String, String)] = []) {
        answer(APIResponses.json(status, value, headers: headers), route: route)
    }

    /// Answers a deferred reply with a JSON text already serialized (its newline included).
    func reply(_ status: Int, json body: [UInt8]) {
        answer(APIResponses.json(status, body: body), route: route)
    }

    /// Answers a deferred reply with an error.
    func fail(_ error: RunLoopError) {
        answer(APIResponses.error(error), route: route)
    }
}
