import Foundation
import LabPlayer
import RunLoopCore
import RunLoopTestSupport
import Testing

@testable import RunLoopServer

/// Asking a real server everything the derived contract checks.
extension OpenAPIContractDerivedTests {
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

        // A handler that does not return: the run, the stop and the end that wait on it (504).
        // It sleeps 30 s: under ThreadSanitizer on 2 cores a request can take 2-3 s, and a
        // shorter sleep could end before the last of them, which would then not wait.
        try await ServerProcess.with(["--token", token, "--max-wait", "0.5", "--max-sleep-ms", "60000"]) { server in
            let c = Caller(client: server.client)
            let t = try await c.call("POST", "/api/threads", json: ["run": ["style": "manual"]])
            let base = "/api/threads/\(t["id"].string ?? "")"
            _ = try await c.call("POST", "\(base)/perform", json: ["selector": "sleep", "args": ["ms": 30_000]])
            async let run = c.call("POST", "\(base)/run", json: ["seconds": 0.05])
            // Until the run is inside the perform's handler.
            let deadline = Date().addingTimeInterval(10)
            var state = Value.null
            repeat {
                state = try await c.call("GET", base, json: nil)["state"]
            } while state != "running" && Date() < deadline
            #expect(state == "running")
            // Predicting while a run is under way: that run, from now (200, its `about`).
            let busy = try await c.call("POST", "\(base)/predict", json: ["seconds": 0.05])
            seen.note("POST /api/threads/{id}/predict", busy.status, busy.json)
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
}
