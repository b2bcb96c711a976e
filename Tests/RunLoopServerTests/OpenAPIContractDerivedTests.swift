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
    static let document = OpenAPIDocument.embedded

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

    /// The server's idle task queue: small enough to fill here, large enough
    /// that the shipped experiments' task steps never find it full (a full
    /// queue makes `play` retry a step for up to 10 s).
    static let maxTasks = 12

    /// The server's answers to everything this suite asks.
    static func observe() async throws -> Seen {
        var seen = Seen()
        let experiments = E2EPaths.packageRoot.appendingPathComponent("experiments").path
        // A store of its own, where an instance ran and stopped: the fleet has one to forget.
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("rl-contract-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        try await ServerProcess.with(["--data-dir", dir.path, "--instance-id", "gone"]) { _ in }
        let flags = [
            "--token", token, "--max-tasks", "\(Self.maxTasks)", "--max-body", "4096", "--experiments-dir", experiments,
            "--data-dir", dir.path, "--instance-id", "contract",
        ]
        try await ServerProcess.with(flags) { server in
            let c = Caller(client: server.client)
            for (method, template) in routes {
                let operation = "\(method) \(template)"
                func note(_ r: TestHTTPResponse) { seen.note(operation, r.status, r.json) }
                if template == "/api/events" {
                    // A stream: refused before it starts, or its head read and the connection closed.
                    note(try await c.call("GET", template, headers: []))
                    note(try await c.call("GET", template, headers: [("Host", "evil.example")]))
                    let stream = try EventStreamClient<String>(
                        port: server.port, path: template, headers: [("Authorization", "Bearer \(token)")]
                    ) { $0 }
                    #expect(stream.state.wait(timeout: 10) { $0.status != nil })
                    if let status = stream.state.update({ $0.status }) {
                        note(TestHTTPResponse(status: status, headers: [], body: []))
                    }
                    stream.disconnect()
                    continue
                }
                let ids = try await c.fixture()
                // Headers: no token, a foreign page, a foreign Host.
                let path = fill(template, ids)
                note(try await c.call(method, path, headers: []))
                note(try await c.call(method, path, headers: [("Host", "evil.example")]))
                if method != "GET" {
                    let auth = ("Authorization", "Bearer \(token)")
                    note(try await c.call(method, path, headers: [auth, ("Origin", "http://evil.example")]))
                }
                // Each id unknown in turn.
                for name in parameters(template) {
                    note(
                        try await c.call(method, fill(template, ids, unknown: name), json: validBodies[template] ?? nil)
                    )
                }
                // Each documented query parameter with values of the wrong kind.
                for parameter in Self.operation(method, template)["parameters"].items.map(resolve)
                where parameter["in"] == "query" {
                    let name = parameter["name"].string ?? ""
                    for bad in ["x", "-1", "99999999999999999999999"] {
                        note(try await c.call(method, "\(path)?\(name)=\(bad)", json: nil))
                    }
                }
                if method == "POST" {
                    guard let valid = validBodies[template] else {
                        Issue.record("no valid body for \(operation): add its smallest one to validBodies")
                        continue
                    }
                    note(try await c.call(method, path, body: Array("not json".utf8)))
                    note(try await c.call(method, path, json: ["zzz": 1]))
                    note(try await c.call(method, path, json: [:]))
                    note(try await c.call(method, path, body: Array("{}".utf8), contentType: "text/plain"))
                    let big = Value.object(["zzz": .string(String(repeating: "x", count: 5000))])
                    note(try await c.call(method, path, json: big))
                    // Each documented field with a value of the wrong type.
                    for (field, schema) in properties(requestSchema(method, template)).sorted(by: { $0.key < $1.key }) {
                        guard let wrong = wrongValue(schema) else { continue }
                        var body = valid?.object ?? [:]
                        body[field] = wrong
                        note(try await c.call(method, path, json: .object(body)))
                    }
                    // The valid request last (a run stops the fixture's loop, a delete ends things).
                    let answer = try await c.call(method, path, json: valid)
                    note(answer)
                    var fields: [(String, Value?)] = []
                    collectDefaults(
                        requestSchema(method, template), given: valid ?? [:], answer: answer.json, into: &fields)
                    // A perform is listed while it waits: what the list shows counts too.
                    if template.hasSuffix("/perform"), let pid = answer["performId"].string {
                        let list = try await c.call("GET", fill("/api/threads/{id}/perform", ids), json: nil)
                        let item = list["pending"].items.first { $0["performId"] == .string(pid) } ?? .null
                        collectDefaults(
                            requestSchema(method, template), given: valid ?? [:], answer: item, into: &fields)
                    }
                    seen.filled[operation, default: []] += fields
                } else {
                    note(try await c.call(method, path, json: nil))
                }
                _ = try await c.call("DELETE", "/api/threads/\(ids["id"] ?? "")", json: nil)
            }

            // States a learner reaches: a full task queue and a taken id; a wait that passes.
            let t = try await c.fixture()
            let tasks = "/api/threads/\(t["id"] ?? "")/tasks"
            // The fixture queued f1: f2… and then "a" fill the queue; f1 again is taken.
            let filler: [Value] = (2..<Self.maxTasks).map { ["id": .string("f\($0)"), "selector": "count"] }
            for body: Value in filler + [["id": "f1", "selector": "count"], ["id": "a", "selector": "count"]] {
                let r = try await c.call("POST", tasks, json: body)
                seen.note("POST /api/threads/{id}/tasks", r.status, r.json)
            }
            let full = try await c.call("POST", tasks, json: ["id": "b", "selector": "count"])
            seen.note("POST /api/threads/{id}/tasks", full.status, full.json)
            #expect(full.status == 429, "the task queue did not fill: \(full.status) \(full.json)")
            // A kind or style that does not take the request.
            let base = "/api/threads/\(t["id"] ?? "")"
            for (operation, path) in [
                ("POST /api/threads/{id}/sources/{sid}/signal", "\(base)/sources/\(t["port"] ?? "")/signal"),
                ("POST /api/threads/{id}/sources/{sid}/messages", "\(base)/sources/\(t["sid"] ?? "")/messages"),
            ] {
                let r = try await c.call("POST", path, json: nil)
                seen.note(operation, r.status, r.json)
            }
            let loop = try await c.call("POST", "/api/threads", json: nil)
            let notManual = try await c.call(
                "POST", "/api/threads/\(loop["id"].string ?? "")/run", json: ["seconds": 0.05])
            seen.note("POST /api/threads/{id}/run", notManual.status, notManual.json)
            // A task that is running cannot be removed.
            let loopTasks = "/api/threads/\(loop["id"].string ?? "")/tasks"
            _ = try await c.call("POST", loopTasks, json: ["id": "slow", "selector": "sleep", "args": ["ms": 1500]])
            let running = Date().addingTimeInterval(10)
            while try await c.call("GET", loopTasks, json: nil)["tasks"].items.first?["running"] != true,
                Date() < running
            {}
            for (operation, path) in [
                ("DELETE /api/threads/{id}/tasks/{taskId}", "\(loopTasks)/slow"),
                ("DELETE /api/threads/{id}/tasks", loopTasks),
            ] {
                let r = try await c.call("DELETE", path, json: nil)
                seen.note(operation, r.status, r.json)
            }
            let waited = try await c.call(
                "POST", "/api/threads/\(t["id"] ?? "")/perform",
                json: ["selector": "count", "waitUntilDone": true, "timeout": 0.1])
            seen.note("POST /api/threads/{id}/perform", waited.status, waited.json)
            // The fleet: a stopped instance is forgotten; this running one is not.
            for id in ["gone", "contract"] {
                let r = try await c.call("DELETE", "/api/fleet/\(id)", json: nil)
                seen.note("DELETE /api/fleet/{id}", r.status, r.json)
            }

            // The shipped experiments, played on the same server: the journal has their statuses.
            let since = try await c.call("GET", "/api/journal?limit=1", json: nil)["journalSeq"].number ?? 0
            let player = Player(
                client: LabClient(host: "127.0.0.1", port: server.port, token: token), options: .init(maxWait: 0))
            for (_, experiment) in try ExperimentFiles.load(experiments) { _ = player.play(experiment) }
            let journal = try await c.call("GET", "/api/journal?limit=10000&since=\(Int(since))", json: nil)
            for step in journal["steps"].items {
                let method = step["request", "method"].string ?? ""
                let path = (step["request", "path"].string ?? "").split(separator: "?")[0]
                guard case .matched(let route, _) = router.resolve(method: method, path: String(path)),
                    let status = step["expect", "status"].number
                else { continue }
                seen.statuses["\(method) \(route.template)", default: []].insert(Int(status))
                if status >= 400, let code = step["expect", "json", "error.code"].string {
                    seen.codes[code, default: []].insert(Int(status))
                }
            }
        }

        // A handler that does not return: the run, the stop and the end that wait on it.
        try await ServerProcess.with(["--token", token, "--max-wait", "0.5"]) { server in
            let c = Caller(client: server.client)
            let t = try await c.call("POST", "/api/threads", json: ["run": ["style": "manual"]])
            let base = "/api/threads/\(t["id"].string ?? "")"
            _ = try await c.call("POST", "\(base)/perform", json: ["selector": "sleep", "args": ["ms": 2500]])
            async let run = c.call("POST", "\(base)/run", json: ["seconds": 0.05])
            // Until the run is inside the perform's handler.
            let deadline = Date().addingTimeInterval(10)
            var state = Value.null
            repeat {
                state = try await c.call("GET", base, json: nil)["state"]
            } while state != "running" && Date() < deadline
            #expect(state == "running")
            async let stop = c.call("POST", "\(base)/stop", json: nil)
            let end = try await c.call("DELETE", base, json: nil)
            for (operation, r) in [
                ("POST /api/threads/{id}/run", try await run), ("POST /api/threads/{id}/stop", try await stop),
                ("DELETE /api/threads/{id}", end),
            ] {
                seen.note(operation, r.status, r.json)
            }
        }
        return seen
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
