import MicroHTTP
import RunLoopCore

#if canImport(Glibc)
    import Glibc
#endif

/// The routes as an immutable table: paths are matched segment by segment,
/// literal segments win over captures, so `POST /tasks/suspend` is an action
/// while `DELETE /tasks/{taskId}` removes a task named anything. Every stored
/// property is a `let`, so it is Sendable as the compiler sees it.
struct RouterResponder: Sendable {
    typealias Route = Router.Route
    typealias Segment = Router.Segment

    let routes: [Route]
    /// Every method and path template, in the order they were added (the
    /// contract test compares this table with `openapi.json` both ways).
    var table: [(method: String, template: String)] { routes.map { ($0.method.rawValue, $0.template) } }
    /// The same, typed: what `RouteTableTests` holds against openapi.json's paths.
    var declared: [(method: HTTPMethod, template: RouteTemplate)] { routes.map { ($0.method, $0.path) } }
    /// Route indexes of the templates without a capture, by their exact text: the
    /// common request (`GET /api/version`, `GET /api/threads`) is one lookup.
    private let literal: [String: [Int]]
    /// The templates as a tree of segments: a path walks only the branches its
    /// segments match instead of being compared with every template of its length.
    private let tree: Node

    init(_ routes: [Route]) {
        self.routes = routes
        var literal: [String: [Int]] = [:]
        for (index, route) in routes.enumerated()
        where !route.segments.contains(where: { if case .capture = $0 { true } else { false } }) {
            literal[route.template, default: []].append(index)
        }
        self.literal = literal
        tree = Node(routes.enumerated().map { ($0.element.segments[...], $0.offset) })
    }

    /// One position in the segment tree: the literal segments that may follow
    /// (`segments[i]` leads to `children[i]`), the capture of any name that may
    /// follow, and the routes whose template ends here (in the order added).
    /// Built whole from the routes, then never changed.
    private final class Node: Sendable {
        let segments: [String]
        /// `segments` as bytes, compared with a path's segment by `memcmp`.
        let bytes: [[UInt8]]
        let children: [Node]
        let capture: Node?
        let routes: [Int]

        /// The node for the routes whose remaining segments are `entries`.
        init(_ entries: [(path: ArraySlice<Segment>, route: Int)]) {
            var routes: [Int] = []
            var literals: [String] = []
            var below: [String: [(path: ArraySlice<Segment>, route: Int)]] = [:]
            var captured: [(path: ArraySlice<Segment>, route: Int)] = []
            for entry in entries {
                switch entry.path.first {
                case nil:
                    routes.append(entry.route)
                case .literal(let text):
                    if below[text] == nil { literals.append(text) }
                    below[text, default: []].append((entry.path.dropFirst(), entry.route))
                case .capture:
                    captured.append((entry.path.dropFirst(), entry.route))
                }
            }
            self.routes = routes
            segments = literals
            bytes = literals.map { Array($0.utf8) }
            children = literals.map { Node(below[$0] ?? []) }
            capture = captured.isEmpty ? nil : Node(captured)
        }
    }

    /// Walks the tree along `parts` from `node`; appends every route whose
    /// template matches the whole path, with its count of literal segments.
    private static func walk(
        _ node: Node, _ parts: [Substring], _ position: Int, literals: Int, into found: inout [(route: Int, score: Int)]
    ) {
        guard position < parts.count else {
            for route in node.routes { found.append((route, literals)) }
            return
        }
        let part = parts[position]
        // The segment's bytes are taken once and compared with each literal child.
        let compared: Void? = part.utf8.withContiguousStorageIfAvailable { text in
            for index in node.bytes.indices where node.bytes[index].count == text.count {
                let same = node.bytes[index].withUnsafeBufferPointer {
                    text.isEmpty || memcmp($0.baseAddress!, text.baseAddress!, text.count) == 0
                }
                if same { walk(node.children[index], parts, position + 1, literals: literals + 1, into: &found) }
            }
        }
        if compared == nil {
            for index in node.segments.indices where part == node.segments[index] {
                walk(node.children[index], parts, position + 1, literals: literals + 1, into: &found)
            }
        }
        if let child = node.capture, PercentDecoding.isWellFormed(part) {
            walk(child, parts, position + 1, literals: literals, into: &found)
        }
    }

    /// The non-empty `/`-separated segments of `path`.
    private static func segments(_ path: String) -> [Substring] {
        var parts: [Substring] = []
        parts.reserveCapacity(6)
        var start = path.utf8.startIndex
        var index = start
        let end = path.utf8.endIndex
        while index < end {
            if path.utf8[index] == UInt8(ascii: "/") {
                if start < index { parts.append(path[start..<index]) }
                start = path.utf8.index(after: index)
            }
            index = path.utf8.index(after: index)
        }
        if start < end { parts.append(path[start..<end]) }
        return parts
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
        if let exact = literal[path], let index = exact.first(where: { routes[$0].method.rawValue == effective }) {
            return .matched(routes[index], params: [:])
        }
        let parts = Self.segments(path)
        var found: [(route: Int, score: Int)] = []
        Self.walk(tree, parts, 0, literals: 0, into: &found)
        // Most literal segments wins; on a tie, the route added first.
        var best: (index: Int, score: Int)?
        for (index, score) in found where routes[index].method.rawValue == effective {
            if let current = best, current.score > score || (current.score == score && current.index < index) {
                continue
            }
            best = (index, score)
        }
        let anyPath = !found.isEmpty
        if let best {
            let route = routes[best.index]
            return .matched(route, params: captures(route, parts))
        }
        return anyPath ? .methodNotAllowed(allow: allowedMethods(path: path)) : .notFound
    }

    /// The methods some route accepts for `path` (for 405's `Allow`).
    func allowedMethods(path: String) -> [String] {
        var found: [(route: Int, score: Int)] = []
        Self.walk(tree, Self.segments(path), 0, literals: 0, into: &found)
        var methods = Set(found.map { routes[$0.route].method.rawValue })
        if methods.contains("GET") { methods.insert("HEAD") }
        return methods.sorted()
    }
}
