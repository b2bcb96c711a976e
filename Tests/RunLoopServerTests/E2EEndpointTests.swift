import Foundation
import RunLoopCore
import Testing

@testable import RunLoopServer
import RunLoopTestSupport

/// Every endpoint's happy path, and the OpenAPI document, against the real binary.
@Suite("E2E endpoints")
struct E2EEndpointTests {
    @Test("service endpoints: version, selectors, probes, dashboard")
    func service() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let version = try await c.get("/api/version")
            #expect(version.status == 200)
            #expect(version["name"] == "runloopd")
            #expect(version["version"] == .string(RunLoopService.version))
            let selectors = try await c.get("/api/selectors")
            let names = selectors["selectors"].items.compactMap { $0["name"].string }
            for name in ["echo", "log", "sleep", "spin", "count", "stop", "fail", "send", "runNested"] {
                #expect(names.contains(name), "selector \(name)")
            }
            #expect(try await c.get("/healthz")["status"] == "ok")
            let ready = try await c.get("/readyz")
            #expect(ready.status == 200)
            #expect(ready["status"] == "ready")
            let index = try await c.get("/")
            #expect(index.status == 200)
            #expect(index.header("Content-Type")?.hasPrefix("text/html") == true)
        }
    }

    @Test("threads: create, list, get, wakeup, log, run, stop, end")
    func threads() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let created = try await c.post(
                "/api/threads",
                ["name": "worker", "keepAlive": "timer", "run": ["style": "manual", "seconds": 2, "mode": "default"]])
            #expect(created.status == 201)
            let t = try #require(created["id"].string)
            #expect(created.header("Location") == "/api/threads/\(t)")
            #expect(created["name"] == "worker")
            #expect(created["keepAlive"] == "timer")
            #expect(created["run", "style"] == "manual")
            #expect(created["state"] == "idle")
            let list = try await c.get("/api/threads")
            #expect(list["threads"].items.contains { $0["id"] == .string(t) })
            #expect(try await c.get("/api/threads/\(t)")["id"] == .string(t))
            let woken = try await c.post("/api/threads/\(t)/wakeup")
            #expect(woken.status == 200)
            #expect(woken["woken"] == true)
            _ = try await c.post(
                "/api/threads/\(t)/perform", ["selector": "log", "args": ["message": "hello"], "modes": ["default"]])
            let run = try await c.post("/api/threads/\(t)/run", ["seconds": 0.2])
            #expect(run.status == 200)
            #expect(run["exitReason"] == "timedOut")
            let log = try await c.get("/api/threads/\(t)/log")
            #expect(log["lines"].items.contains("hello"))
            async let running = c.post("/api/threads/\(t)/run", ["seconds": 20])
            try await c.waitUntilWaiting(t)
            #expect(try await c.post("/api/threads/\(t)/stop")["exitReason"] == "stopped")
            _ = try await running
            let ended = try await c.delete("/api/threads/\(t)")
            #expect(ended.status == 200)
            #expect(ended["state"] == "exited")
            #expect(ended["ending"] == true)
        }
    }

    @Test("perform: 202 queued, 200 waitUntilDone, pending list, delayed cancel")
    func perform() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.createThread()
            let echo = try await c.post(
                "/api/threads/\(t)/perform", ["selector": "echo", "args": ["a": 1, "b": "two"], "waitUntilDone": true])
            #expect(echo.status == 200)
            #expect(echo["ok"] == true)
            #expect(echo["result"] == ["a": 1, "b": "two"])
            #expect(echo["thread"] == .string(t))
            #expect(echo["queuedMs"].number != nil && echo["ranMs"].number != nil)
            let failed = try await c.post("/api/threads/\(t)/perform", ["selector": "fail", "waitUntilDone": true])
            #expect(failed.status == 200)
            #expect(failed["ok"] == false)
            #expect(failed["error", "code"] == "selector_failed")
            let queued = try await c.post("/api/threads/\(t)/perform", ["selector": "count"])
            #expect(queued.status == 202)
            #expect(queued["performId"].string != nil)
            let delayed = try await c.post("/api/threads/\(t)/perform", ["selector": "count", "afterDelay": 60])
            #expect(delayed.status == 202)
            let pending = try await c.get("/api/threads/\(t)/perform")
            #expect(pending["pending"].items.contains { $0["performId"] == delayed["performId"] })
            let cancelled = try await c.delete("/api/threads/\(t)/perform?selector=count")
            #expect(cancelled.status == 200)
            #expect(cancelled["cancelled"] == 1)
            #expect(try await c.get("/api/threads/\(t)/perform")["pending"].items.isEmpty)
        }
    }

    @Test("timers: add, list, get, invalidate")
    func timers() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.createThread()
            let added = try await c.post(
                "/api/threads/\(t)/timers",
                ["interval": 60, "tolerance": 0.5, "action": ["selector": "count", "args": ["name": "ticks"]]])
            #expect(added.status == 201)
            let tm = try #require(added["id"].string)
            #expect(added.header("Location") == "/api/threads/\(t)/timers/\(tm)")
            #expect(added["valid"] == true)
            #expect(added["tolerance"] == 0.5)
            #expect(added["action", "selector"] == "count")
            #expect(try await c.get("/api/threads/\(t)/timers")["timers"].items.count == 1)
            #expect(try await c.get("/api/threads/\(t)/timers/\(tm)")["interval"] == 60)
            let gone = try await c.delete("/api/threads/\(t)/timers/\(tm)")
            #expect(gone.status == 200)
            #expect(gone["valid"] == false)
        }
    }

    @Test("sources: add, list, get, signal, message, invalidate")
    func sources() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.createThread()
            let custom = try await c.post("/api/threads/\(t)/sources", ["kind": "custom", "order": 3])
            #expect(custom.status == 201)
            let s = try #require(custom["id"].string)
            #expect(custom["order"] == 3)
            let port = try await c.post("/api/threads/\(t)/sources", ["kind": "port", "mode": "common"])
            let p = try #require(port["id"].string)
            // The two added, and the keep-alive port runloopd listed for the thread.
            let listed = try await c.get("/api/threads/\(t)/sources")["sources"].items
            #expect(listed.count == 3)
            #expect(listed.filter { $0["role"] == "keepAlive" }.count == 1)
            #expect(try await c.post("/api/threads/\(t)/sources/\(s)/signal").status == 200)
            let message = try await c.post("/api/threads/\(t)/sources/\(p)/messages", ["msgid": 1, "data": "x"])
            #expect(message.status == 202)
            _ = try await c.poll("/api/threads/\(t)/sources/\(s)") { $0["fired"] == 1 }
            _ = try await c.poll("/api/threads/\(t)/sources/\(p)") { $0["received"] == 1 }
            let gone = try await c.delete("/api/threads/\(t)/sources/\(s)")
            #expect(gone.status == 200)
            #expect(gone["valid"] == false)
            #expect(gone["cancelled"] == 1)
        }
    }

    @Test("modes, observers, activity")
    func modesAndObservers() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.createThread(["run": ["seconds": 0.05]])
            let modes = try await c.get("/api/threads/\(t)/modes")
            #expect(modes.status == 200)
            #expect(modes["all"].items.contains("default"))
            #expect(
                try await c.post("/api/threads/\(t)/modes/common", ["mode": "extra"])["common"].items.contains("extra"))
            let observer = try await c.post(
                "/api/threads/\(t)/observers", ["activities": ["entry", "exit"], "repeats": true, "mode": "default"])
            #expect(observer.status == 201)
            #expect(observer["activities"] == ["entry", "exit"])
            #expect(try await c.get("/api/threads/\(t)/observers")["observers"].items.count == 1)
            // The loop re-enters every 50 ms: entries and exits arrive.
            let activity = try await c.poll("/api/threads/\(t)/activity") { $0["activity"].items.count >= 2 }
            #expect(activity["activity"].items.allSatisfy { $0["activity"] == "entry" || $0["activity"] == "exit" })
            #expect((activity["lastSeq"].number ?? 0) >= 2)
            let oid = try #require(observer["id"].string)
            let removed = try await c.delete("/api/threads/\(t)/observers/\(oid)")
            #expect(removed.status == 200)
            #expect(removed["valid"] == false)
            #expect(try await c.delete("/api/threads/\(t)/observers/ob999").status == 404)
        }
    }

    @Test("tasks: add, list, remove, suspend, resume, execute, remove all")
    func tasks() async throws {
        try await ServerProcess.with { server in
            let c = server.client
            let t = try await c.createThread()
            #expect(try await c.post("/api/threads/\(t)/tasks/suspend")["suspended"] == true)
            for id in ["a", "b", "c"] {
                #expect(
                    try await c.post("/api/threads/\(t)/tasks", ["id": .string(id), "selector": "count"]).status == 201)
            }
            #expect(try await c.get("/api/threads/\(t)/tasks")["count"] == 3)
            #expect(try await c.delete("/api/threads/\(t)/tasks/b")["count"] == 2)
            let removed = try await c.delete("/api/threads/\(t)/tasks")
            #expect(removed["removed"] == 2)
            _ = try await c.post(
                "/api/threads/\(t)/tasks", ["id": "later", "selector": "count", "args": ["name": "q"]])
            #expect(try await c.post("/api/threads/\(t)/tasks/resume")["suspended"] == false)
            _ = try await c.poll("/api/threads/\(t)/tasks") { $0["done"] == 1 }
            let executed = try await c.post(
                "/api/threads/\(t)/tasks/execute", ["selector": "count", "args": ["name": "now"]])
            #expect(executed.status == 202)
            _ = try await c.poll("/api/threads/\(t)/log") { $0["counters", "now"] == 1 }
        }
    }

    @Test("GET /api/openapi.json is OpenAPI 3.1 describing every route")
    func openAPI() async throws {
        try await ServerProcess.with { server in
            let response = try await server.client.get("/api/openapi.json")
            #expect(response.status == 200)
            let document = response.json
            #expect(document["openapi"] == "3.1.0")
            let paths = try #require(document["paths"].object)
            let api = API(
                registry: WorkerRegistry(), events: EventHub(maxClients: 1), limits: APILimits(), version: .null,
                journal: Journal(capacity: 1), experiments: ExperimentLibrary(experiments: [], problems: []),
                openAPI: .null)
            let routes = api.makeRouter().routes
            #expect(routes.count > 30)
            for route in routes {
                let operation = paths[route.template]?[route.method.rawValue.lowercased()]
                #expect(operation?.object != nil, "\(route.method) \(route.template) is not in the document")
                #expect(operation?["responses"].object?.isEmpty == false)
            }
            #expect(paths["/healthz"]?["get"].object != nil)
            #expect(paths["/readyz"]?["get"].object != nil)
            // Every $ref points at something that exists.
            var refs: [String] = []
            func collect(_ value: Value) {
                switch value {
                case .object(let members):
                    if let ref = members["$ref"]?.string { refs.append(ref) }
                    members.values.forEach(collect)
                case .array(let items): items.forEach(collect)
                default: break
                }
            }
            collect(document)
            #expect(!refs.isEmpty)
            for ref in Set(refs) {
                let keys = ref.split(separator: "/").dropFirst().map(String.init)
                #expect(ref.hasPrefix("#/") && document.member(keys) != .null, "dangling \(ref)")
            }
        }
    }
}
