import Foundation
import RunLoopCore
import RunLoopTestSupport
import Testing

@testable import RunLoopServer

/// Reading openapi.json and docs/api.md for the derived contract.
extension OpenAPIContractDerivedTests {
    /// `template` with its `{params}` filled from `ids` (`{sid}` of a messages
    /// route is the port), one of them replaced by `unknown` when given.
    static func fill(_ template: String, _ ids: [String: String], unknown: String? = nil) -> String {
        var path = template
        for name in Self.parameters(template) {
            var value = ids[name] ?? "x"
            if name == "sid" && template.hasSuffix("/messages") { value = ids["port"] ?? value }
            if name == unknown { value = name == "mode" ? "nosuchmode" : "zz9" }
            path = path.replacingOccurrences(of: "{\(name)}", with: value)
        }
        return path
    }

    static func parameters(_ template: String) -> [String] {
        template.split(separator: "/").filter { $0.hasPrefix("{") }.map { String($0.dropFirst().dropLast()) }
    }

    /// The documented operation for a route.
    static func operation(_ method: String, _ template: String) -> Value {
        document["paths", template, method.lowercased()]
    }

    /// A `$ref` followed (once per level).
    static func resolve(_ value: Value) -> Value {
        guard let ref = value["$ref"].string, ref.hasPrefix("#/") else { return value }
        return document.member(ref.dropFirst(2).split(separator: "/").map(String.init))
    }

    /// A schema's properties, `allOf` and `$ref` followed.
    static func properties(_ schema: Value) -> [String: Value] {
        let schema = resolve(schema)
        var all = schema["properties"].object ?? [:]
        for part in schema["allOf"].items {
            all.merge(properties(part)) { mine, _ in mine }
        }
        return all.mapValues(resolve)
    }

    static func requestSchema(_ method: String, _ template: String) -> Value {
        operation(method, template)["requestBody", "content", "application/json", "schema"]
    }

    /// A value of the wrong type for `schema` (nil when any value fits).
    static func wrongValue(_ schema: Value) -> Value? {
        let types = Set((schema["type"].items.compactMap(\.string)) + [schema["type"].string].compactMap { $0 })
        if types.isEmpty { return nil }
        if types.contains("number") || types.contains("integer") { return "x" }
        if types.contains("string") { return .array([]) }
        if types.contains("boolean") || types.contains("array") || types.contains("object") { return 7 }
        return nil
    }

    /// For every documented field of `schema` the request left out: the
    /// value the answer shows at the same path (nil: the answer does not show it).
    static func collectDefaults(
        _ schema: Value, given: Value, answer: Value, prefix: String = "", into fields: inout [(String, Value?)]
    ) {
        guard case .object = answer else { return }
        for (name, property) in properties(schema) {
            let path = prefix + name
            if let inner = given.object?[name] {
                if case .object = inner {
                    collectDefaults(property, given: inner, answer: answer[name], prefix: path + ".", into: &fields)
                }
                continue
            }
            fields.append((path, answer.object?[name]))
        }
    }

    /// Every text of the document: descriptions, summaries.
    static func texts(_ value: Value, _ path: String = "", into out: inout [(String, String)]) {
        switch value {
        case .object(let members):
            for (key, member) in members {
                if key == "description" || key == "summary", let text = member.string { out.append((path, text)) }
                texts(member, path + "/" + key, into: &out)
            }
        case .array(let items):
            for (index, item) in items.enumerated() { texts(item, path + "/\(index)", into: &out) }
        default: break
        }
    }

    static func docsAPI() throws -> String {
        try String(
            contentsOf: E2EPaths.packageRoot.appendingPathComponent("docs/api.md"), encoding: .utf8)
    }
}
