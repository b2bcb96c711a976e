import Foundation
import RunLoopCore
import Testing

@testable import RunLoopServer

/// The declared routes (a typed `HTTPMethod` and a `RouteTemplate` each,
/// issue 41) against openapi.json's paths, both ways: a route in code and not
/// in openapi.json fails `everyRouteIsDocumented`; an operation in openapi.json
/// no route declares fails `everyDocumentedOperationIsARoute`. openapi.json is
/// read from the checkout.
@Suite("Route table: declared routes and openapi.json's paths agree")
struct RouteTableTests {
    static var router: RouterResponder {
        API(
            registry: WorkerRegistry(), events: EventHub(maxClients: 1), limits: APILimits(), version: .null,
            journal: Journal(capacity: 1), experiments: ExperimentLibrary(experiments: [], problems: []),
            openAPI: .null
        ).makeRouter()
    }

    static var declared: [(method: HTTPMethod, template: RouteTemplate)] { router.declared }

    /// `METHOD /template` for every declared route, and the probes answered before routing.
    static var routed: Set<String> {
        var routed = Set(declared.map { "\($0.method.rawValue) \($0.template.text)" })
        for path in RunLoopService.probePaths { routed.insert("GET \(path)") }
        return routed
    }

    /// `METHOD /path` for every operation of openapi.json.
    static var documented: Set<String> {
        var documented = Set<String>()
        for (path, item) in OpenAPIContractTests.document["paths"].object ?? [:] {
            for method in (item.object ?? [:]).keys where method != "parameters" {
                documented.insert("\(method.uppercased()) \(path)")
            }
        }
        return documented
    }

    @Test func everyRouteIsDocumented() {
        let documented = Self.documented
        #expect(!documented.isEmpty)
        for missing in Self.routed.subtracting(documented).sorted() {
            Issue.record("\(missing) is a declared route but not in openapi.json's paths")
        }
    }

    @Test func everyDocumentedOperationIsARoute() {
        let routed = Self.routed
        let router = Self.router
        #expect(routed.count > 40)
        for operation in Self.documented.subtracting(routed).sorted() {
            // Documented on a literal path a capture route answers
            // (DELETE …/tasks/suspend is the {taskId} route): routed.
            let parts = operation.split(separator: " ", maxSplits: 1).map(String.init)
            if case .matched = router.resolve(method: parts[0], path: parts[1]) { continue }
            Issue.record("\(operation) is in openapi.json but no route declares it")
        }
    }

    @Test func documentedMethodsAndPathsAreTyped() {
        // Every operation's method is an HTTPMethod and its path a template.
        for (path, item) in OpenAPIContractTests.document["paths"].object ?? [:] {
            guard let template = RouteTemplate(parsing: path) else {
                Issue.record("\(path): \(RouteTemplate.problem(path) ?? "not a template")")
                continue
            }
            for (method, operation) in item.object ?? [:] where method != "parameters" {
                #expect(HTTPMethod(rawValue: method.uppercased()) != nil, "\(method) \(path)")
                #expect(operation.object != nil && template.text == path)
            }
        }
    }

    @Test func templatesParseOnce() {
        let template: RouteTemplate = "/api/threads/{id}/timers/{tid}"
        #expect(template.captures == ["id", "tid"])
        #expect(template.segments.first == .literal("api"))
        for bad in ["api/x", "/api//x", "/api/{id", "/api/x{id}", "/api/{}", "/api/{id}/{id}"] {
            #expect(RouteTemplate(parsing: bad) == nil, "\(bad)")
        }
    }
}
