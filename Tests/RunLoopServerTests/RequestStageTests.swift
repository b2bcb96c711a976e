import Logging
import MicroHTTP
import Primitives
import RunLoopCore
import Testing

@testable import RunLoopServer

/// The request stages one at a time (issue 41): each `RequestStage` runs alone
/// on a request made here, with a `next` that records whether the stage let
/// the rest of the path look. No HTTP server runs; a stage that needs the
/// control loop gets a real `ControlLoop` whose handler keeps the jobs.
@Suite("Request stages, each alone")
struct RequestStageTests {
    /// What a stage did with one request.
    struct Outcome {
        let result: StageResult
        let passed: Bool

        var status: Int? {
            if case .answer(let response, _) = result { return response.status }
            return nil
        }
        var route: String? {
            if case .answer(_, let route) = result { return route }
            return nil
        }
        var code: String? {
            if case .answer(let response, _) = result { return response.errorCode }
            return nil
        }
        var handedOn: Bool {
            if case .handedOn = result { return !passed }
            return false
        }
        func header(_ name: String) -> String? {
            guard case .answer(let response, _) = result else { return nil }
            return response.headers.first { $0.0.lowercased() == name.lowercased() }?.1
        }
    }

    /// Runs `stage` on `input`; its `next` records the call and hands on.
    static func run<Stage: RequestStage>(_ stage: Stage, _ input: Stage.Input) -> Outcome {
        var passed = false
        let result = stage.handle(input) { _ in
            passed = true
            return .handedOn
        }
        return Outcome(result: result, passed: passed)
    }

    static let tools = ResponseFinisher.Tools(
        metrics: ServiceMetrics(), journal: Journal(capacity: 0), history: nil, sequence: EventSequence(),
        accessLog: nil, logger: Logger(label: "request-stage-tests"))

    /// A request as the stages meet it, with the service's state as given.
    static func exchange(
        _ method: String, _ path: String, headers: HTTPHeaders = ["host": "127.0.0.1:8080"], body: String = "",
        query: [String: String] = [:], token: String? = nil, loop: ControlLoop<RunLoopService.Job>? = nil,
        starting: Bool = false, router: RouterResponder = Router().buildResponder()
    ) throws -> Exchange {
        let request = HTTPRequest(method: method, path: path, query: query, headers: headers, body: Array(body.utf8))
        let state = ServiceSnapshot(
            requestGuard: try RequestGuard(boundHost: "127.0.0.1"), loop: loop, router: router, token: token,
            settingUp: false, starting: starting, draining: false, accepting: !starting)
        let isAPI = path == "/api" || path.hasPrefix("/api/")
        return Exchange(
            request: request, state: state,
            finisher: ResponseFinisher(request, isAPI: isAPI, cors: [], tools: tools, respond: { _ in }))
    }

    /// A control loop that keeps what it is sent (stopped by the caller).
    static func controlLoop(capacity: Int = 16, kept: Locked<[String]>) throws -> ControlLoop<RunLoopService.Job> {
        try ControlLoop<RunLoopService.Job>(name: "rl-test-control", capacity: capacity) { batch in
            kept.withLock { $0.append(contentsOf: batch.map(\.request.path)) }
            kept.notifyAll()
        }
    }

    // MARK: stage 1, the guard

    @Test func guardRefusesAForeignHost() throws {
        let outcome = Self.run(GuardStage(), try Self.exchange("GET", "/api/threads", headers: ["host": "evil.test"]))
        #expect(!outcome.passed && outcome.status == 421 && outcome.code == "misdirected_host")
    }

    @Test func guardRefusesAChangeFromAnotherOrigin() throws {
        let headers: HTTPHeaders = ["host": "127.0.0.1:8080", "origin": "http://evil.test"]
        let outcome = Self.run(GuardStage(), try Self.exchange("POST", "/api/threads", headers: headers))
        #expect(!outcome.passed && outcome.status == 403 && outcome.code == "forbidden_origin")
    }

    @Test func guardClosesTheAPIWhileStartingAndPassesTheRest() throws {
        let starting = Self.run(GuardStage(), try Self.exchange("GET", "/api/threads", starting: true))
        #expect(!starting.passed && starting.status == 503 && starting.code == "not_ready")
        // Outside /api nothing waits for the control loop.
        #expect(Self.run(GuardStage(), try Self.exchange("GET", "/healthz", starting: true)).passed)
        let kept = Locked<[String]>([])
        let loop = try Self.controlLoop(kept: kept)
        defer { _ = loop.stop() }
        #expect(Self.run(GuardStage(), try Self.exchange("GET", "/api/threads", loop: loop)).passed)
    }

    // MARK: stage 2, probes and static files

    @Test func localStagePassesTheAPIAndAnswersProbes() throws {
        let local = LocalStage(service: nil)
        #expect(Self.run(local, try Self.exchange("GET", "/api/version")).passed)
        let health = Self.run(local, try Self.exchange("GET", "/healthz"))
        #expect(!health.passed && health.status == 200 && health.route == "/healthz")
        let post = Self.run(local, try Self.exchange("POST", "/readyz"))
        #expect(post.status == 405 && post.header("Allow") == "GET, HEAD")
        // The service is held weakly: once it is gone, a probe that reads it says so.
        let gone = Self.run(local, try Self.exchange("GET", "/readyz"))
        #expect(gone.status == 503 && gone.code == "shutting_down")
    }

    // MARK: stage 3, the token

    @Test func authenticationAsksForTheToken() throws {
        let stage = AuthenticationStage()
        #expect(Self.run(stage, try Self.exchange("GET", "/api/threads")).passed, "no --token: open")
        let refused = Self.run(stage, try Self.exchange("GET", "/api/threads", token: "s3cret"))
        #expect(!refused.passed && refused.status == 401 && refused.code == "unauthorized")
        #expect(refused.header("WWW-Authenticate")?.hasPrefix("Bearer") == true)
        let wrong: HTTPHeaders = ["host": "127.0.0.1:8080", "authorization": "Bearer s3cre"]
        #expect(
            Self.run(stage, try Self.exchange("GET", "/api/threads", headers: wrong, token: "s3cret")).status == 401)
        let right: HTTPHeaders = ["host": "127.0.0.1:8080", "authorization": "bearer s3cret"]
        #expect(Self.run(stage, try Self.exchange("GET", "/api/threads", headers: right, token: "s3cret")).passed)
        // The event stream may carry it in the query (EventSource sends no headers).
        let stream = try Self.exchange("GET", "/api/events", query: ["access_token": "s3cret"], token: "s3cret")
        #expect(Self.run(stage, stream).passed)
        let elsewhere = try Self.exchange("GET", "/api/threads", query: ["access_token": "s3cret"], token: "s3cret")
        #expect(Self.run(stage, elsewhere).status == 401)
    }

    // MARK: stage 4, --read-only

    @Test func readOnlyRefusesChangesOnly() throws {
        let open = ReadOnlyStage(readOnly: false)
        #expect(Self.run(open, try Self.exchange("DELETE", "/api/threads/t1")).passed)
        let closed = ReadOnlyStage(readOnly: true)
        #expect(Self.run(closed, try Self.exchange("GET", "/api/threads")).passed)
        for method in ["POST", "PUT", "PATCH", "DELETE"] {
            let outcome = Self.run(closed, try Self.exchange(method, "/api/threads"))
            #expect(!outcome.passed && outcome.status == 403 && outcome.code == "read_only", "\(method)")
        }
    }

    // MARK: stage 5, the media type

    @Test func aBodyMustBeJSON() throws {
        let stage = MediaTypeStage()
        let bare = Self.run(stage, try Self.exchange("POST", "/api/threads", body: "{}"))
        #expect(!bare.passed && bare.status == 415 && bare.code == "unsupported_media_type")
        let json: HTTPHeaders = ["host": "127.0.0.1:8080", "content-type": "application/json; charset=utf-8"]
        #expect(Self.run(stage, try Self.exchange("POST", "/api/threads", headers: json, body: "{}")).passed)
        #expect(Self.run(stage, try Self.exchange("POST", "/api/threads/t1/wakeup")).passed, "no body: no type")
    }

    // MARK: stage 6, the hop

    @Test func theHopPostsTheJobOrSaysTheQueueIsFull() throws {
        let hop = ControlHop(maxQueued: 7)
        #expect(Self.run(hop, try Self.exchange("GET", "/api/threads")).passed, "no control loop: the path's end")
        let kept = Locked<[String]>([])
        let loop = try Self.controlLoop(kept: kept)
        defer { _ = loop.stop() }
        let posted = Self.run(hop, try Self.exchange("GET", "/api/threads", loop: loop))
        #expect(posted.handedOn)
        let arrived = kept.withLock(when: { !$0.isEmpty }, timeout: 30) { paths, _ in paths }
        #expect(arrived == ["/api/threads"])
        let full = try Self.controlLoop(capacity: 0, kept: kept)
        defer { _ = full.stop() }
        let refused = Self.run(hop, try Self.exchange("GET", "/api/threads", loop: full))
        #expect(refused.status == 503 && refused.code == "overloaded" && refused.header("Retry-After") == "1")
    }

    // MARK: the control loop's side: the gate and the router

    static func job(_ method: String, _ path: String, router: RouterResponder) -> RunLoopService.Job {
        RunLoopService.Job(
            request: HTTPRequest(method: method, path: path), answer: .caller { _ in }, router: router,
            postedAt: Monotonic.now())
    }

    static var router: RouterResponder {
        var r = Router()
        r.add(.get, "/api/threads/{id}") { ctx throws(RunLoopError) in .json(200, ["id": .string(try ctx.param("id"))])
        }
        r.add(.delete, "/api/threads/{id}") { _ throws(RunLoopError) in throw .notFound("thread", "t9") }
        r.add(.post, "/api/threads/{id}/run") { _ throws(RunLoopError) in .deferred }
        return r.buildResponder()
    }

    @Test func theGateAnswersWhatWasQueuedBeforeAStop() {
        let stopping = StopFlag()
        let gate = ControlGate(metrics: ServiceMetrics(), stopping: stopping)
        #expect(Self.run(gate, Self.job("GET", "/api/threads", router: Self.router)).passed)
        stopping.set()
        let late = Self.run(gate, Self.job("GET", "/api/threads", router: Self.router))
        #expect(!late.passed && late.status == 503 && late.code == "shutting_down" && late.route == "unmatched")
    }

    @Test func theRouterAnswersMatchesAndPassesUnknownPaths() {
        let router = RouterStage()
        let found = Self.run(router, Self.job("GET", "/api/threads/t1", router: Self.router))
        #expect(found.status == 200 && found.route == "/api/threads/{id}")
        let thrown = Self.run(router, Self.job("DELETE", "/api/threads/t1", router: Self.router))
        #expect(thrown.status == 404 && thrown.code == "not_found" && thrown.route == "/api/threads/{id}")
        #expect(Self.run(router, Self.job("POST", "/api/threads/t1/run", router: Self.router)).handedOn)
        let method = Self.run(router, Self.job("PUT", "/api/threads/t1", router: Self.router))
        #expect(method.status == 405 && method.header("Allow") == "DELETE, GET, HEAD" && method.route == "unmatched")
        #expect(Self.run(router, Self.job("GET", "/api/nothing", router: Self.router)).passed)
        let end = RouterStage.notFound(Self.job("GET", "/api/nothing", router: Self.router))
        #expect(Outcome(result: end, passed: false).status == 404)
    }
}
