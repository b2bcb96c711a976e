import Foundation
import Primitives
import RunLoopCore
import Testing

@testable import RunLoopServer

/// `openapi.json` is the API reference: these keep it true to the code (routes,
/// enums, events, limits, selectors) and complete (descriptions, links).
@Suite("OpenAPI contract")
struct OpenAPIContractTests {
    /// `Sources/RunLoopServer/API/openapi.json`, read from the source tree.
    static let sourceText: String = {
        let tests = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        let file = tests.appendingPathComponent("../../Sources/RunLoopServer/API/openapi.json").standardized
        return (try? String(contentsOf: file, encoding: .utf8)) ?? ""
    }()

    /// The checkout's file with its `x-runloopd-enum` annotations filled from
    /// the Swift words, as the build fills the compiled copy (`OpenAPIEnums`).
    static let filledText: String = (try? OpenAPIEnums.fill(sourceText)) ?? ""

    /// The document in the checkout, its enums filled (not the compiled copy,
    /// which is as old as the last build: `swift test --skip-build` after an
    /// edit of openapi.json tests the edit; `embeddedIsFresh` says when to build).
    static let document: Value = (try? JSON.parse(Array(filledText.utf8))) ?? .null

    /// `operationId` → (method, path, operation).
    static var operations: [String: (method: String, path: String, operation: Value)] {
        var all: [String: (method: String, path: String, operation: Value)] = [:]
        for (path, item) in document["paths"].object ?? [:] {
            for (method, operation) in item.object ?? [:] where method != "parameters" {
                all[operation["operationId"].string ?? ""] = (method, path, operation)
            }
        }
        return all
    }

    @Test("the embedded document is openapi.json (the EmbedFiles build plugin)")
    func embeddedIsFresh() throws {
        #expect(!Self.sourceText.isEmpty, "openapi.json not found next to OpenAPIDocument.swift")
        var committed = try OpenAPIEnums.fill(Self.sourceText)
        while committed.hasSuffix("\n") { committed.removeLast() }
        #expect(
            OpenAPISpec.json == committed,
            "the compiled document differs from openapi.json with its enums filled: build again")
        #expect(Self.document["openapi"] == "3.1.0")
    }

    @Test("every route is documented and every documented operation is routed")
    func routesAndPathsMatch() {
        let api = API(
            registry: WorkerRegistry(), events: EventHub(maxClients: 1), limits: APILimits(), version: .null,
            journal: Journal(capacity: 1), experiments: ExperimentLibrary(experiments: [], problems: []), openAPI: .null
        )
        let router = api.makeRouter()
        var routed = Set(router.table.map { "\($0.method) \($0.template)" })
        for path in RunLoopService.probePaths { routed.insert("GET \(path)") }
        var documented = Set<String>()
        for (path, item) in Self.document["paths"].object ?? [:] {
            for method in (item.object ?? [:]).keys where method != "parameters" {
                documented.insert("\(method.uppercased()) \(path)")
            }
        }
        for missing in routed.subtracting(documented).sorted() {
            Issue.record("\(missing) is routed but not in openapi.json")
        }
        // A documented operation is routed when its template is a route, or when
        // the router resolves it to one (DELETE …/tasks/suspend is the {taskId} route).
        for operation in documented.subtracting(routed).sorted() {
            let parts = operation.split(separator: " ", maxSplits: 1).map(String.init)
            if case .matched = router.resolve(method: parts[0], path: parts[1]) { continue }
            Issue.record("\(operation) is in openapi.json but no route answers it")
        }
        #expect(routed.count > 40)
    }

    @Test("the default configuration and the built-in selectors serve the committed document")
    func committedIsTheDefault() {
        let served = OpenAPIDocument.document(limits: ServiceConfiguration())
        #expect(served["info", "version"] == .string(RunLoopService.version))
        // Compared as booleans: a failure names the part, not two 160 kB values.
        let limits = served["info", "x-runloopd-limits"] == Self.document["info", "x-runloopd-limits"]
        #expect(limits, "update info.x-runloopd-limits in openapi.json to the default configuration")
        let selectors =
            served["components", "schemas", "SelectorArguments"]
            == Self.document["components", "schemas", "SelectorArguments"]
        #expect(selectors, "update SelectorArguments in openapi.json to what the built-in selectors give")
        let whole = served == Self.document
        #expect(whole, "a default server must serve openapi.json unchanged (bump info.version with the code)")
    }

    @Test("limits and custom selectors are overlaid at start-up")
    func overlay() {
        var configuration = ServiceConfiguration()
        configuration.limits.maxSeconds = 100
        configuration.api.maxWaitSeconds = 50
        configuration.api.minTimerInterval = 0.5
        configuration.http.maxBodyBytes = 1000
        configuration.limits.maxMessageBytes = 10
        let registry = SelectorRegistry(limits: configuration.limits)
        registry.register(
            Selector(
                name: "custom", summary: "A selector an embedding app added.",
                arguments: [ArgumentSpec("n", .integer, required: true, minimum: 1, maximum: 7, summary: "a number")]
            ) { _ throws(RunLoopError) in SelectorOutcome() })
        let served = OpenAPIDocument.document(limits: configuration, selectors: registry.all)
        let schemas = served["components", "schemas"]
        #expect(served["info", "x-runloopd-limits", "max-body"] == 1000)
        #expect(schemas["RunRequest", "properties", "seconds", "maximum"] == 50)
        #expect(schemas["PerformRequest", "properties", "timeout", "maximum"] == 50)
        #expect(schemas["PerformRequest", "properties", "afterDelay", "maximum"] == 100)
        #expect(schemas["RunPolicyRequest", "properties", "seconds", "maximum"] == 100)
        #expect(schemas["TimerRequest", "properties", "interval", "maximum"] == 100)
        #expect(schemas["TimerRequest", "else", "properties", "interval", "minimum"] == 0.5)
        #expect(schemas["MessageRequest", "properties", "data", "maxLength"] == 10)
        let alternatives = schemas["SelectorArguments", "oneOf"].items
        #expect(alternatives.count == registry.all.count)
        let custom = alternatives.first { $0["title"] == "custom" }
        #expect(custom?["properties", "args", "properties", "n", "maximum"] == 7)
        #expect(custom?["required"] == ["selector", "args"])
        // The sleep selector's bound follows the engine's limits too.
        let sleep = alternatives.first { $0["title"] == "sleep" }
        #expect(sleep?["properties", "args", "properties", "ms", "maximum"] == .number(Double(10_000)))
    }

    @Test("every operation, parameter, response, property and enum has a description")
    func describedEverywhere() {
        var undescribed: [String] = []
        func check(_ value: Value, _ path: String) {
            if value["description"].string?.isEmpty ?? true, value["$ref"] == .null {
                undescribed.append(path)
            }
        }
        func walkSchema(_ schema: Value, _ path: String) {
            guard case .object(let members) = schema else { return }
            if members["enum"] != nil || members["const"] != nil, path.hasSuffix("schema") {
                check(schema, path)
            }
            for (name, property) in members["properties"]?.object ?? [:] {
                check(property, "\(path).\(name)")
                walkSchema(property, "\(path).\(name)")
            }
            // Not fields: `if`/`then`/`else` and `not` only constrain the properties above.
            for key in ["items"] {
                if let inner = members[key] { walkSchema(inner, "\(path)/\(key)") }
            }
            for key in ["oneOf", "anyOf", "allOf"] {
                for (index, inner) in (members[key]?.items ?? []).enumerated() {
                    walkSchema(inner, "\(path)/\(key)[\(index)]")
                }
            }
        }
        for (name, schema) in Self.document["components", "schemas"].object ?? [:] {
            check(schema, "schemas.\(name)")
            walkSchema(schema, "schemas.\(name)")
        }
        for (name, item) in Self.document["components", "responses"].object ?? [:] { check(item, "responses.\(name)") }
        for (name, item) in Self.document["components", "parameters"].object ?? [:] {
            check(item, "parameters.\(name)")
        }
        for (id, entry) in Self.operations {
            check(entry.operation, id)
            #expect(entry.operation["summary"].string != nil, "\(id) has no summary")
            for (status, response) in entry.operation["responses"].object ?? [:] { check(response, "\(id) \(status)") }
            for parameter in entry.operation["parameters"].items { check(parameter, "\(id) parameter") }
        }
        #expect(undescribed.isEmpty, "no description: \(undescribed.sorted().joined(separator: ", "))")
    }

    @Test("the documented enums are the engine's")
    func enumsMatchTheEngine() {
        let schemas = Self.document["components", "schemas"]
        func values(_ schema: Value) -> Set<String> { Set(schema["enum"].items.compactMap(\.string)) }
        #expect(values(schemas["ExitReason"]) == Set(ExitReason.allCases.map(\.name)))
        #expect(values(schemas["ActivityName"]) == Set(Activity.allCases.map(\.rawValue)))
        #expect(values(schemas["RunPolicy", "properties", "style"]) == Set(RunStyle.allCases.map(\.rawValue)))
        #expect(values(schemas["Thread", "properties", "keepAlive"]) == Set(KeepAlive.allCases.map(\.rawValue)))
        #expect(values(schemas["Source", "properties", "kind"]) == Set(SourceKind.allCases.map(\.rawValue)))
        #expect(
            values(schemas["Thread", "properties", "state"]) == Set(["running", "waiting", "idle", "exited"]))
    }

    @Test("the event stream documents every event EventHub sends")
    func events() {
        let stream = Self.operations["streamEvents"]?.operation["responses", "200", "content", "text/event-stream"]
        #expect(stream?["schema", "$ref"] == "#/components/schemas/ServerSentEvent")
        let alternatives = Self.document["components", "schemas", "ServerSentEvent", "oneOf"].items
        let names = alternatives.compactMap { $0["properties", "event", "const"].string }
        // hello, resumed and snapshot (EventHub.open, EventHub.replay, EventHub.flush) and one
        // per RunLoopEvent case (EventHub.describe).
        #expect(
            Set(names) == [
                "hello", "resumed", "snapshot", "thread", "run-exit", "timer", "perform", "source", "task", "activity",
                "turn",
                "warning", "stall", "stall-ended", "source-mode", "timer-mode",
            ])
        for alternative in alternatives {
            let ref = alternative["properties", "data", "contentSchema", "$ref"].string ?? ""
            let name = ref.split(separator: "/").last.map(String.init) ?? ""
            #expect(Self.document["components", "schemas", name].object != nil, "\(ref) is missing")
        }
    }

    @Test("links give every operation on a created object that object's id")
    func links() {
        let operations = Self.operations
        var linked = Set<String>()
        for (id, entry) in operations {
            for (_, response) in entry.operation["responses"].object ?? [:] {
                for (name, link) in response["links"].object ?? [:] {
                    let target = link["operationId"].string ?? ""
                    guard let targetEntry = operations[target] else {
                        Issue.record("\(id) link \(name) names no operation \(target)")
                        continue
                    }
                    linked.insert(target)
                    // Every path parameter of the target is given by the link.
                    let given = Set((link["parameters"].object ?? [:]).keys)
                    for parameter in Self.pathParameters(targetEntry.path) where !given.contains(parameter) {
                        Issue.record("\(id) link \(name) to \(target) does not give {\(parameter)}")
                    }
                }
            }
        }
        for (id, entry) in operations where !Self.pathParameters(entry.path).isEmpty && !linked.contains(id) {
            Issue.record("no link reaches \(id) (\(entry.method.uppercased()) \(entry.path)) with real ids")
        }
    }

    static func pathParameters(_ path: String) -> [String] {
        path.split(separator: "/").filter { $0.hasPrefix("{") }.map { String($0.dropFirst().dropLast()) }
    }
}
