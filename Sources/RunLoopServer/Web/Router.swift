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
        let method: HTTPMethod
        let path: RouteTemplate
        let handler: RouteHandler

        /// The template's text: the answer's metrics label.
        var template: String { path.text }
        var segments: [Segment] { path.segments }
    }

    typealias Segment = RouteTemplate.Segment

    private(set) var routes: [Route] = []

    /// Declares a route: a typed method and a template parsed once, here.
    mutating func add(_ method: HTTPMethod, _ template: RouteTemplate, _ handler: @escaping RouteHandler) {
        routes.append(Route(method: method, path: template, handler: handler))
    }

    /// The routes added so far, frozen for answering requests.
    func buildResponder() -> RouterResponder {
        RouterResponder(routes)
    }
}
