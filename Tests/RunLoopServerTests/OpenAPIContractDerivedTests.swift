import Foundation
import RunLoopCore
import RunLoopTestSupport
import Testing

@testable import RunLoopServer

/// Docs that cannot drift: what the server answers is found by asking it, not
/// written down here. Every route of the router is exercised on a real
/// server with valid, invalid and missing inputs (ids, bodies, query
/// parameters, headers), the shipped experiments are played on it, and a few
/// states are reached (a full task queue, a passed wait, a busy handler). The
/// statuses, error codes and filled-in defaults seen are then held against
/// openapi.json and docs/api.md.
@Suite("OpenAPI contract, derived from a real server")
struct OpenAPIContractDerivedTests {
    static let token = "contract-token-0123456789"
    /// openapi.json as the checkout has it (see `OpenAPIContractTests.document`).
    static let document = OpenAPIContractTests.document

    /// What the server answered, per operation (`METHOD /template`).
    struct Seen {
        var statuses: [String: Set<Int>] = [:]
        /// Error code → the statuses it came with.
        var codes: [String: Set<Int>] = [:]
        /// Operation → (request field path, value the server filled in) for
        /// fields a valid request left out.
        var filled: [String: [(field: String, value: Value?)]] = [:]

        mutating func note(_ operation: String, _ status: Int, _ json: Value) {
            statuses[operation, default: []].insert(status)
            // An HTTP error's code; a 200 perform result may carry a handler's error, which is not one.
            if status >= 400, let code = json["error", "code"].string { codes[code, default: []].insert(status) }
        }
    }

    /// The router's table, plus the probes answered before it.
    static let routes: [(method: String, template: String)] = {
        let api = API(
            registry: WorkerRegistry(), events: EventHub(maxClients: 1), limits: APILimits(), version: .null,
            journal: Journal(capacity: 1), experiments: ExperimentLibrary(experiments: [], problems: []), openAPI: .null
        )
        let router = api.makeRouter()
        return router.table + RunLoopService.probePaths.map { ("GET", $0) }
    }()

    static let router: RouterResponder = {
        API(
            registry: WorkerRegistry(), events: EventHub(maxClients: 1), limits: APILimits(), version: .null,
            journal: Journal(capacity: 1), experiments: ExperimentLibrary(experiments: [], problems: []), openAPI: .null
        ).makeRouter()
    }()

    /// A valid body for each POST route, as small as it can be (every field
    /// left out is one whose default the server fills in). A POST route
    /// missing here fails the test: add its smallest valid body.
    static let validBodies: [String: Value?] = [
        "/api/threads": nil,
        "/api/threads/{id}/run": ["seconds": 0.05],
        "/api/threads/{id}/predict": ["seconds": 0.05],
        "/api/threads/{id}/stop": nil,
        "/api/threads/{id}/wakeup": nil,
        "/api/threads/{id}/modes/common": ["mode": "tracking"],
        "/api/threads/{id}/observers": ["activities": ["beforeWaiting"]],
        "/api/threads/{id}/perform": ["selector": "count"],
        "/api/threads/{id}/sources": ["kind": "custom"],
        "/api/threads/{id}/sources/{sid}/messages": ["msgid": 1],
        "/api/threads/{id}/sources/{sid}/signal": nil,
        "/api/threads/{id}/sources/{sid}/modes": ["mode": "extra"],
        "/api/threads/{id}/tasks": ["id": "v1", "selector": "count"],
        "/api/threads/{id}/tasks/suspend": nil,
        "/api/threads/{id}/tasks/resume": nil,
        "/api/threads/{id}/tasks/execute": ["selector": "count"],
        "/api/threads/{id}/timers": ["interval": 1],
        "/api/threads/{id}/timers/{tid}/modes": ["mode": "extra"],
    ]

    /// One connection per request, with the token unless told otherwise.
    struct Caller {
        let client: E2EClient

        func call(
            _ method: String, _ path: String, body: [UInt8]? = nil, contentType: String? = "application/json",
            headers: [(String, String)]? = nil
        ) async throws -> TestHTTPResponse {
            try await client.send(
                method, path, body: body, contentType: body == nil ? nil : contentType,
                headers: headers ?? [("Authorization", "Bearer \(OpenAPIContractDerivedTests.token)")], timeout: 30)
        }

        func call(_ method: String, _ path: String, json: Value?) async throws -> TestHTTPResponse {
            try await call(method, path, body: json.map(JSON.serialize))
        }

        /// A manual thread with one of everything: the ids a route's path needs.
        func fixture() async throws -> [String: String] {
            let t = try await call("POST", "/api/threads", json: ["run": ["style": "manual"]])
            let id = try #require(t["id"].string, "\(t)")
            let base = "/api/threads/\(id)"
            let timer = try await call("POST", "\(base)/timers", json: ["interval": 5])
            let tid = try #require(timer["id"].string)
            _ = try await call("POST", "\(base)/timers/\(tid)/modes", json: ["mode": "tracking"])
            let source = try await call("POST", "\(base)/sources", json: ["kind": "custom"])
            let sid = try #require(source["id"].string)
            _ = try await call("POST", "\(base)/sources/\(sid)/modes", json: ["mode": "tracking"])
            let observer = try await call("POST", "\(base)/observers", json: ["activities": ["entry"]])
            let perform = try await call("POST", "\(base)/perform", json: ["selector": "count", "afterDelay": 60])
            _ = try await call("POST", "\(base)/tasks", json: ["id": "f1", "selector": "count"])
            return [
                "id": id, "tid": tid, "sid": sid, "port": try #require(t["keepAliveSource"].string),
                "oid": try #require(observer["id"].string), "pid": try #require(perform["performId"].string),
                "taskId": "f1", "mode": "tracking", "eid": "testdemo1-empty-mode",
            ]
        }
    }

    @Test("every status, error code and default the server gives is the documented one")
    func derivedContract() async throws {
        let seen = try await Self.observe()
        let transport: Set<Int> = [401, 403, 421, 503]

        // 1. Every status seen is documented for its operation, and a documented
        // answer that needs no state reached here (a 2xx, a 504) was seen.
        for (method, template) in Self.routes {
            let operation = "\(method) \(template)"
            let seenHere = seen.statuses[operation] ?? []
            #expect(!seenHere.isEmpty, "\(operation) was never exercised")
            let documented = Set(
                (Self.operation(method, template)["responses"].object ?? [:]).keys.compactMap { Int($0) })
            let undocumented = seenHere.subtracting(documented)
            #expect(
                undocumented.isEmpty,
                "\(operation) answers \(undocumented.sorted()) but openapi.json documents only \(documented.sorted())")
            let provable = documented.filter { ($0 / 100 == 2 || $0 == 504) && !transport.contains($0) }
            let never = provable.subtracting(seenHere)
            #expect(never.isEmpty, "\(operation) documents \(never.sorted()), which it never answered here")
        }

        // 2. A status a text names beside an error code is the one that code comes with.
        let statusCode = #/\b([1-5][0-9][0-9])\s+`?([a-z]+_[a-z_]+)`?/#
        var texts: [(String, String)] = []
        Self.texts(Self.document, into: &texts)
        texts.append(("docs/api.md", try Self.docsAPI()))
        for (where_, text) in texts {
            for match in text.matches(of: statusCode) {
                guard let status = Int(match.output.1), let statuses = seen.codes[String(match.output.2)] else {
                    continue
                }
                #expect(
                    statuses.contains(status),
                    "\(where_) says \(match.output.0) but \(match.output.2) comes with \(statuses.sorted())")
            }
        }

        // 3. An operation's own texts name only statuses it answers.
        let statusWord = #/\b([1-5][0-9][0-9])\b/#
        for (method, template) in Self.routes {
            let operation = "\(method) \(template)"
            var own: [(String, String)] = []
            let entry = Self.operation(method, template)
            if let text = entry["description"].string { own.append(("description", text)) }
            for (field, schema) in Self.properties(Self.requestSchema(method, template)) {
                if let text = schema["description"].string { own.append((field, text)) }
            }
            let answered = seen.statuses[operation] ?? []
            let documented = Set((entry["responses"].object ?? [:]).keys.compactMap { Int($0) })
            for (field, text) in own {
                for match in text.matches(of: statusWord) {
                    guard let status = Int(match.output.1) else { continue }
                    if !documented.contains(status) {
                        Issue.record("\(operation) \(field) names \(status), which its responses do not list: \(text)")
                    } else if status / 100 == 2 || status == 409 || status == 429 || status == 504,
                        !answered.contains(status)
                    {
                        Issue.record("\(operation) \(field) names \(status), which it never answered here: \(text)")
                    }
                }
            }
        }

        // 4. docs/api.md's table of statuses lists every code seen, under the status it came with.
        let table = try Self.docsAPI().split(separator: "\n").filter { $0.hasPrefix("| ") }
        var listed: [String: Set<Int>] = [:]
        for row in table {
            let cells = row.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 3, let status = Int(cells[0]) else { continue }
            for match in cells[cells.count - 1].matches(of: #/`([a-z_]+)`/#) {
                listed[String(match.output.1), default: []].insert(status)
            }
        }
        for (code, statuses) in seen.codes.sorted(by: { $0.key < $1.key }) {
            #expect(
                listed[code] == statuses,
                "docs/api.md lists \(code) under \((listed[code] ?? []).sorted()); the server sends it with \(statuses.sorted())"
            )
        }

        // 5. A default openapi.json gives is what the server fills in; a field it
        // gives none for is not filled with a value that reads as one.
        for (operation, fields) in seen.filled.sorted(by: { $0.key < $1.key }) {
            let parts = operation.split(separator: " ", maxSplits: 1).map(String.init)
            var schemas: [String: Value] = [:]
            func walk(_ schema: Value, _ prefix: String) {
                for (name, property) in Self.properties(schema) {
                    schemas[prefix + name] = property
                    if property["properties"] != .null { walk(property, prefix + name + ".") }
                }
            }
            walk(Self.requestSchema(parts[0], parts[1]), "")
            for (field, value) in fields {
                guard let schema = schemas[field], let value else { continue }
                if let documented = schema.object?["default"] {
                    #expect(
                        value == documented,
                        "\(operation) \(field): openapi.json says default \(JSON.string(documented)), the server fills in \(JSON.string(value))"
                    )
                } else if case .number = value, schema["type"].items.contains("number") || schema["type"] == "number",
                    !(schema["description"].string ?? "").contains("default: ")
                {
                    Issue.record(
                        "\(operation) \(field): left out, the server shows \(JSON.string(value)) but openapi.json gives no default"
                    )
                }
            }
        }
    }

    @Test("every schema the server serves puts each bound on a type it applies to")
    func boundsFitTheirTypes() async throws {
        var problems: [String] = []
        func check(_ value: Value, _ path: String) {
            switch value {
            case .object(let members):
                let types = Set(value["type"].items.compactMap(\.string) + [value["type"].string].compactMap { $0 })
                if !types.isEmpty {
                    let rules: [(keys: [String], types: Set<String>)] = [
                        (
                            ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"],
                            ["number", "integer"]
                        ),
                        (["minLength", "maxLength", "pattern"], ["string"]),
                        (["minItems", "maxItems", "items", "uniqueItems"], ["array"]),
                    ]
                    for rule in rules {
                        for key in rule.keys where members[key] != nil && types.isDisjoint(with: rule.types) {
                            problems.append("\(path): \(key) on \(types.sorted())")
                        }
                    }
                }
                for (key, member) in members where key != "x-runloopd-limit" { check(member, "\(path)/\(key)") }
            case .array(let items):
                for (index, item) in items.enumerated() { check(item, "\(path)/\(index)") }
            default: break
            }
        }
        check(Self.document, "openapi.json")
        try await ServerProcess.with { server in
            let selectors = try await server.client.get("/api/selectors")
            #expect(selectors.status == 200)
            #expect(!selectors["selectors"].items.isEmpty)
            check(selectors.json, "GET /api/selectors")
        }
        #expect(problems.isEmpty, "\(problems.joined(separator: "\n"))")
    }
}
