import RunLoopCore

/// What a route handler answers.
enum Reply {
    /// A JSON body with a status.
    case json(Int, Value, headers: [(String, String)] = [])
    /// A ready response (event streams, raw documents).
    case response(HTTPResponse)
    /// The handler will call `RouteContext.respond` later (long waits).
    case deferred
}

/// One request as a route handler sees it.
struct RouteContext: Sendable {
    let request: HTTPRequest
    let params: [String: String]
    let respond: @Sendable (HTTPResponse) -> Void

    func param(_ name: String) -> String { params[name] ?? "" }

    /// Parses the body, accepting only `allowed` fields.
    func body(_ allowed: Set<String>) throws(RunLoopError) -> Body {
        try Body(request.body, allowed: allowed)
    }

    /// Answers a deferred reply with JSON.
    func reply(_ status: Int, _ value: Value, headers: [(String, String)] = []) {
        respond(APIResponses.json(status, value, headers: headers))
    }

    /// Answers a deferred reply with an error.
    func fail(_ error: RunLoopError) {
        respond(APIResponses.error(error))
    }
}

typealias RouteHandler = @Sendable (RouteContext) throws(RunLoopError) -> Reply

/// A method + path template table. Paths are matched segment by segment;
/// `{name}` captures one segment. Literal segments win over captures, so
/// `POST /tasks/suspend` is an action while `DELETE /tasks/{taskId}` removes a
/// task named anything.
struct Router: Sendable {
    struct Route: Sendable {
        let method: String
        let template: String
        let segments: [String]
        let handler: RouteHandler
    }

    private(set) var routes: [Route] = []

    mutating func add(_ method: String, _ template: String, _ handler: @escaping RouteHandler) {
        routes.append(
            Route(
                method: method, template: template, segments: template.split(separator: "/").map(String.init),
                handler: handler))
    }

    /// Matches `path`: the score counts literal segments (higher wins).
    private func match(_ route: Route, _ parts: [Substring]) -> (params: [String: String], score: Int)? {
        guard route.segments.count == parts.count else { return nil }
        var params: [String: String] = [:]
        var score = 0
        for (segment, part) in zip(route.segments, parts) {
            if segment.hasPrefix("{") {
                guard let decoded = PercentDecoding.decode(part), !decoded.isEmpty else { return nil }
                params[String(segment.dropFirst().dropLast())] = decoded
            } else if segment == part {
                score += 1
            } else {
                return nil
            }
        }
        return (params, score)
    }

    /// The route for a request, the methods the path allows, and the template.
    func resolve(method: String, path: String) -> (route: Route, params: [String: String])?? {
        let parts = path.split(separator: "/", omittingEmptySubsequences: true)
        var best: (Route, [String: String], Int)?
        var anyPath = false
        for route in routes {
            guard let (params, score) = match(route, parts) else { continue }
            anyPath = true
            let effective = method == "HEAD" ? "GET" : method
            guard route.method == effective else { continue }
            if best == nil || score > best!.2 { best = (route, params, score) }
        }
        if let best { return .some((best.0, best.1)) }
        return anyPath ? .some(nil) : nil
    }

    /// The methods some route accepts for `path` (for 405's `Allow`).
    func allowedMethods(path: String) -> [String] {
        let parts = path.split(separator: "/", omittingEmptySubsequences: true)
        var methods = Set<String>()
        for route in routes where match(route, parts) != nil { methods.insert(route.method) }
        if methods.contains("GET") { methods.insert("HEAD") }
        return methods.sorted()
    }
}

/// Building HTTP responses from values and errors: statuses are decided here only.
enum APIResponses {
    static func json(_ status: Int, _ value: Value, headers: [(String, String)] = []) -> HTTPResponse {
        HTTPResponse(
            status: status,
            headers: [("Content-Type", "application/json"), ("Cache-Control", "no-store")] + headers,
            body: JSON.serialize(value) + [0x0A])
    }

    /// The status for an engine error kind.
    static func status(for kind: RunLoopError.Kind) -> Int {
        switch kind {
        case .badValue: return 400
        case .notFound: return 404
        case .conflict, .gone: return 409
        case .limit: return 429
        case .deadline: return 504
        case .failed: return 422
        }
    }

    static func error(_ error: RunLoopError) -> HTTPResponse {
        var headers: [(String, String)] = []
        if error.kind == .limit { headers.append(("Retry-After", "1")) }
        return json(status(for: error.kind), ["error": Rep.error(error)], headers: headers)
    }

    static func error(status: Int, code: String, message: String, headers: [(String, String)] = []) -> HTTPResponse {
        json(
            status, ["error": ["code": .string(code), "message": .string(message), "field": .null]], headers: headers)
    }
}
