import MicroHTTP
import Foundation
import Logging
import Primitives
import RunLoopCore

/// `--setup`: the declared setup is applied by `start()`, once the HTTP
/// server listens and before `/readyz` answers ready. Each step is an API
/// request posted into the control loop like the HTTP threads post theirs,
/// so the router, the handlers, their validation and their errors are the
/// API's own. Being the operator's, these requests skip only the token and
/// `--read-only` checks (and the HTTP edge: Host/Origin guard, access log,
/// journal).
extension RunLoopService {
    /// Applies `setup`; throws the first refusal, naming the file and the item.
    func applySetup(_ setup: Setup) throws(Setup.Failure) {
        var applier = SetupApplier(setup: setup) { [self] method, path, body in
            inProcess(method, path, body)
        }
        let ids = try applier.apply()
        var aliases: [String] = []
        for (thread, id) in zip(setup.threads, ids) { aliases.append("\(thread.alias ?? "#\(thread.index)")=\(id)") }
        logger.info(
            "setup applied",
            metadata: [
                "file": "\(setup.file)", "threads": .stringConvertible(ids.count),
                "requests": .stringConvertible(applier.requests),
                "ids": "\(aliases.joined(separator: ","))",
            ])
    }

    /// One request through the control loop; waits for its answer (at most
    /// the longest wait a request may take, plus a margin).
    func inProcess(_ method: String, _ path: String, _ body: Value?) -> Result<SetupApplier.Answer, Setup.Failure> {
        let (control, router) = running.withLock { ($0.accepting ? $0.control : nil, $0.router) }
        guard let control else {
            return .failure(Setup.Failure(description: "runloopd is not accepting requests"))
        }
        let request = HTTPRequest(
            method: method, path: path, headers: body == nil ? [:] : ["content-type": "application/json"],
            body: body.map(JSON.serialize) ?? [], remoteAddress: "setup")
        let answer = Locked<HTTPResponse?>(nil)
        // Straight to the control loop: the HTTP thread's stages (guard,
        // token, --read-only) are for requests from outside.
        let job = Job(
            request: request,
            answer: .caller { response in
                answer.withLock { $0 = response }
                answer.notifyAll()
            }, router: router, postedAt: Monotonic.now())
        guard control.send(job) else {
            return .failure(Setup.Failure(description: "the control loop's queue is full"))
        }
        let wait = configuration.api.maxWaitSeconds + configuration.api.endWaitSeconds + 5
        let response = answer.withLock(when: { $0 != nil }, timeout: wait) { value, _ in value }
        guard let response else {
            return .failure(Setup.Failure(description: "no answer within \(Int(wait)) s"))
        }
        let json = (try? JSON.parse(response.body)) ?? .null
        logger.debug(
            "setup request", metadata: ["request": "\(method) \(path)", "status": .stringConvertible(response.status)])
        return .success(SetupApplier.Answer(status: response.status, json: json))
    }
}

extension API {
    /// `GET /api/setup`: the live state as a setup file (`Setup.export`).
    func addSetup(_ r: inout Router) {
        r.add(.get, "/api/setup") { _ throws(RunLoopError) in .json(200, Setup.export(registry)) }
    }
}
