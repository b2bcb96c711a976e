import Logging
import MicroHTTP
import Primitives
import RunLoopCore
import Testing

@testable import RunLoopServer

/// The stages composed into one responder (issue 41): the order holds, the
/// first stage that answers ends the path, a stage sees what the rest of the
/// path returned, and the service's composed path puts its checks in the
/// order ARCHITECTURE.md gives (token before `--read-only` before the hop).
@Suite("Request path: the stages composed once")
struct RequestPathTests {
    /// A stage that answers under its name, or passes and marks what came back.
    struct Named: RequestStage {
        let name: String
        let answers: Bool

        func handle(_ input: [String], next: ([String]) -> StageResult) -> StageResult {
            let seen = input + [name]
            if answers { return .answer(HTTPResponse(status: 200), route: seen.joined(separator: ">")) }
            guard case .answer(let response, let route) = next(seen) else { return .handedOn }
            return .answer(response, route: route + "<" + name)
        }
    }

    static func route(_ result: StageResult) -> String? {
        if case .answer(_, let route) = result { return route }
        return nil
    }

    @Test func theFirstStageThatAnswersEndsThePath() {
        let path = StageResponder(
            Named(name: "a", answers: false).then(Named(name: "b", answers: true)).then(
                Named(name: "c", answers: true)),
            end: { _ in .answer(HTTPResponse(status: 404), route: "end") })
        // b answered; a saw its answer on the way back; c never ran.
        #expect(Self.route(path.respond([])) == "a>b<a")
    }

    @Test func theEndAnswersWhatEveryStagePassed() {
        let path = StageResponder(
            Named(name: "a", answers: false).then(Named(name: "b", answers: false)),
            end: { seen in .answer(HTTPResponse(status: 404), route: seen.joined(separator: ">") + ">end") })
        #expect(Self.route(path.respond([])) == "a>b>end<b<a")
    }

    // MARK: the service's own path

    static func service(readOnly: Bool) -> RunLoopService {
        var configuration = ServiceConfiguration()
        configuration.readOnly = readOnly
        configuration.journalSize = 0
        return RunLoopService(configuration: configuration, logger: Logger(label: "request-path-tests"))
    }

    static func status(_ result: StageResult) -> Int? {
        if case .answer(let response, _) = result { return response.status }
        return nil
    }

    @Test func theServicePathChecksTheTokenThenReadOnlyThenHops() throws {
        let service = Self.service(readOnly: true)
        let paths = RequestPaths(service: service)
        let kept = Locked<[String]>([])
        let loop = try RequestStageTests.controlLoop(kept: kept)
        defer { _ = loop.stop() }
        func respond(_ method: String, _ path: String, bearer: String?) throws -> StageResult {
            let headers: HTTPHeaders =
                bearer.map { ["host": "127.0.0.1:8080", "authorization": "Bearer \($0)"] } ?? ["host": "127.0.0.1:8080"]
            return paths.http.respond(
                try RequestStageTests.exchange(method, path, headers: headers, token: "s3cret", loop: loop))
        }
        #expect(Self.status(try respond("DELETE", "/api/threads/t1", bearer: nil)) == 401)
        #expect(Self.status(try respond("DELETE", "/api/threads/t1", bearer: "s3cret")) == 403)
        // A probe is never behind the token, and never reaches the control loop.
        #expect(Self.status(try respond("GET", "/healthz", bearer: nil)) == 200)
        guard case .handedOn = try respond("GET", "/api/threads", bearer: "s3cret") else {
            Issue.record("a read with the token did not reach the hop")
            return
        }
        let arrived = kept.withLock(when: { !$0.isEmpty }, timeout: 30) { paths, _ in paths }
        #expect(arrived == ["/api/threads"])
    }

    @Test func theControlPathRoutesAndEndsIn404() {
        let service = Self.service(readOnly: false)
        let paths = RequestPaths(service: service)
        let router = RequestStageTests.router
        #expect(
            Self.status(paths.control.respond(RequestStageTests.job("GET", "/api/threads/t1", router: router))) == 200)
        let unknown = paths.control.respond(RequestStageTests.job("GET", "/api/nowhere", router: router))
        #expect(Self.status(unknown) == 404 && Self.route(unknown) == "unmatched")
        service.stopping.set()
        #expect(
            Self.status(paths.control.respond(RequestStageTests.job("GET", "/api/threads/t1", router: router))) == 503)
    }

    @Test func thePathDoesNotKeepTheServiceAlive() {
        weak var gone: RunLoopService?
        var paths: RequestPaths?
        do {
            let service = Self.service(readOnly: false)
            gone = service
            paths = RequestPaths(service: service)
        }
        #expect(paths != nil)
        #expect(gone == nil, "the composed path holds the service")
    }
}
