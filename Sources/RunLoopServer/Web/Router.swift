import MicroHTTP
import RunLoopCore

typealias RouteHandler = @Sendable (RouteContext) throws(RunLoopError) -> Reply

/// Collects the API's routes: a method + path template and a handler each
/// (Hummingbird's shape: a router builds, a responder answers). `{name}`
/// captures one segment. Once every route is added, `buildResponder()`
/// freezes the table into an immutable `RouterResponder`, the only form a
/// request ever meets; the builder shares nothing with it.
struct Router {
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

    mutating func add(_ method: String, _ template: String, _ handler: @escaping RouteHandler) {
        let segments = template.split(separator: "/").map { piece -> Segment in
            piece.hasPrefix("{") ? .capture(String(piece.dropFirst().dropLast())) : .literal(String(piece))
        }
        routes.append(Route(method: method, template: template, segments: segments, handler: handler))
    }

    /// The routes added so far, frozen for answering requests.
    func buildResponder() -> RouterResponder {
        RouterResponder(routes)
    }
}
