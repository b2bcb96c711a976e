import MicroHTTP
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
/// task named anything. Built once at start, then only read (on the control loop).
struct Router: Sendable {
    struct Route: Sendable {
        let method: String
        let template: String
        let segments: [Segment]
        let handler: RouteHandler
    }

    /// One `/`-separated piece of a template.
    enum Segment: Sendable {
        case literal(String)
        case capture(String)
    }

    private(set) var routes: [Route] = []
    /// Every method and path template, in the order they were added (the
    /// contract test compares this table with `openapi.json` both ways).
    var table: [(method: String, template: String)] { routes.map { ($0.method, $0.template) } }
    /// Route indexes by segment count: a path is compared only with templates of its length.
    private var byLength: [[Int]] = []
    /// Route indexes of the templates without a capture, by their exact text: the
    /// common request (`GET /api/version`, `GET /api/threads`) is one lookup.
    private var literal: [String: [Int]] = [:]

    mutating func add(_ method: String, _ template: String, _ handler: @escaping RouteHandler) {
        let segments = template.split(separator: "/").map { piece -> Segment in
            piece.hasPrefix("{") ? .capture(String(piece.dropFirst().dropLast())) : .literal(String(piece))
        }
        while byLength.count <= segments.count { byLength.append([]) }
        byLength[segments.count].append(routes.count)
        if !segments.contains(where: { if case .capture = $0 { true } else { false } }) {
            literal[template, default: []].append(routes.count)
        }
        routes.append(Route(method: method, template: template, segments: segments, handler: handler))
    }

    /// The indexes of the templates with `count` segments.
    private func templates(ofLength count: Int) -> [Int] {
        count < byLength.count ? byLength[count] : []
    }

    /// Whether `route` matches `parts`; the score counts literal segments (higher
    /// wins). Allocates nothing: captures are checked, decoded only for the winner.
    private func score(_ route: Route, _ parts: [Substring]) -> Int? {
        var score = 0
        for (segment, part) in zip(route.segments, parts) {
            switch segment {
            case .literal(let literal):
                // Byte equality: paths are compared as sent, no Unicode comparison needed.
                guard part.utf8.elementsEqual(literal.utf8) else { return nil }
                score += 1
            case .capture:
                guard PercentDecoding.isWellFormed(part) else { return nil }
            }
        }
        return score
    }

    /// The captures of a route that matched.
    private func captures(_ route: Route, _ parts: [Substring]) -> [String: String] {
        var params: [String: String] = [:]
        for (segment, part) in zip(route.segments, parts) {
            if case .capture(let name) = segment { params[name] = PercentDecoding.decode(part) ?? String(part) }
        }
        return params
    }

    /// What a request's method and path resolve to.
    enum Match {
        /// A route, with its decoded captures.
        case matched(Route, params: [String: String])
        /// The path exists for other methods only (405 with `Allow`).
        case methodNotAllowed(allow: [String])
        /// No template matches the path (404).
        case notFound
    }

    /// The route for a request and its captures, or why there is none.
    func resolve(method: String, path: String) -> Match {
        let effective = method == "HEAD" ? "GET" : method
        // A template that is all literals and equals the path outscores every other
        // template of its length, so its match is final.
        if let exact = literal[path], let index = exact.first(where: { routes[$0].method == effective }) {
            return .matched(routes[index], params: [:])
        }
        let parts = path.split(separator: "/", omittingEmptySubsequences: true)
        var best: (index: Int, score: Int)?
        var anyPath = false
        for index in templates(ofLength: parts.count) {
            let route = routes[index]
            guard let score = score(route, parts) else { continue }
            anyPath = true
            guard route.method == effective else { continue }
            if best == nil || score > best!.score { best = (index, score) }
        }
        if let best {
            let route = routes[best.index]
            return .matched(route, params: captures(route, parts))
        }
        return anyPath ? .methodNotAllowed(allow: allowedMethods(path: path)) : .notFound
    }

    /// The methods some route accepts for `path` (for 405's `Allow`).
    func allowedMethods(path: String) -> [String] {
        let parts = path.split(separator: "/", omittingEmptySubsequences: true)
        var methods = Set<String>()
        for index in templates(ofLength: parts.count) where score(routes[index], parts) != nil {
            methods.insert(routes[index].method)
        }
        if methods.contains("GET") { methods.insert("HEAD") }
        return methods.sorted()
    }
}
