/// The HTTP methods a route may be declared with.
enum HTTPMethod: String, CaseIterable, Sendable {
    case get = "GET"
    case post = "POST"
    case put = "PUT"
    case patch = "PATCH"
    case delete = "DELETE"
}

extension HTTPMethod: CustomStringConvertible {
    /// The method as HTTP writes it (`GET`), in logs, errors and tests alike.
    var description: String { rawValue }
}

/// A route's path template, parsed once when the route is declared:
/// `/`-separated literal segments and `{name}` captures of one segment each.
/// Written as a string literal (`"/api/threads/{id}"`); a malformed template
/// (an empty or unclosed capture, a name used twice) stops the program at
/// start, where `RouteTableTests` runs every declared one.
struct RouteTemplate: Sendable, Hashable, ExpressibleByStringLiteral, CustomStringConvertible {
    /// One `/`-separated piece of a template.
    enum Segment: Sendable, Hashable {
        case literal(String)
        case capture(String)
    }

    /// The template as written (the metrics label and openapi.json's path key).
    let text: String
    let segments: [Segment]

    /// Parses `text`; nil when it is not a template (`RouteTemplate.problem` says why).
    init?(parsing text: String) {
        guard Self.problem(text) == nil else { return nil }
        self.text = text
        segments = text.split(separator: "/").map { piece -> Segment in
            piece.hasPrefix("{") ? .capture(String(piece.dropFirst().dropLast())) : .literal(String(piece))
        }
    }

    init(stringLiteral text: String) {
        guard let template = RouteTemplate(parsing: text) else {
            preconditionFailure("route template \(text): \(Self.problem(text) ?? "malformed")")
        }
        self = template
    }

    /// The capture names, in order.
    var captures: [String] {
        segments.compactMap { if case .capture(let name) = $0 { name } else { nil } }
    }

    var description: String { text }

    /// Why `text` is not a template, or nil.
    static func problem(_ text: String) -> String? {
        guard text.hasPrefix("/") else { return "it does not begin with /" }
        var names = Set<String>()
        for piece in text.split(separator: "/", omittingEmptySubsequences: false).dropFirst() {
            if piece.isEmpty { return "it has an empty segment" }
            let opens = piece.contains("{")
            let closes = piece.contains("}")
            guard opens || closes else { continue }
            guard piece.hasPrefix("{"), piece.hasSuffix("}"), piece.count > 2 else {
                return "the capture \(piece) is not one whole segment {name}"
            }
            let name = String(piece.dropFirst().dropLast())
            guard name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }) else { return "bad capture \(piece)" }
            guard names.insert(name).inserted else { return "the capture {\(name)} appears twice" }
        }
        return nil
    }
}
