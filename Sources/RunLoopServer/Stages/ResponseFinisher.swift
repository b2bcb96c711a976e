import Dispatch
import Foundation
import Logging
import MicroHTTP

/// Stage 8 (whichever thread answers): the one way out. Every answer to an
/// HTTP request, from any stage, the router or a deferred handler, gets its
/// `X-Request-Id`, CORS and security headers, its metrics, for a state-changing
/// `/api` request its journal entry and history record, and an access-log line.
/// One object per request (made on the HTTP thread, shared by the stages, the
/// job and a deferred handler); every property is a `let`.
final class ResponseFinisher: Sendable {
    /// The service's parts every answer touches (made once, with the service).
    final class Tools: Sendable {
        init(
            metrics: ServiceMetrics, journal: Journal, history: HistoryRecorder?, sequence: EventSequence,
            accessLog: (any AccessLogWriter)?, logger: Logger
        ) {
            self.metrics = metrics
            self.journal = journal
            self.history = history
            self.sequence = sequence
            self.accessLog = accessLog
            self.logger = logger
        }

        let metrics: ServiceMetrics
        let journal: Journal
        let history: HistoryRecorder?
        let sequence: EventSequence
        /// The access log's writer (nil: lines go through `logger`).
        let accessLog: (any AccessLogWriter)?
        let logger: Logger
    }

    let tools: Tools
    let request: HTTPRequest
    let requestId: String
    let started = DispatchTime.now().uptimeNanoseconds
    /// The CORS headers for an allowed cross-origin `/api` request.
    let cors: [(String, String)]
    let isAPI: Bool
    /// A POST or DELETE: journalled and kept in the history.
    let changes: Bool
    /// When a change arrived (the journal's replay waits); reads need no clock.
    let arrivedAt: Date
    /// The access line's level (probes and scrapes at debug); nil: not logged.
    let accessLevel: Logger.Level?
    let respond: @Sendable (HTTPResponse) -> Void

    init(
        _ request: HTTPRequest, isAPI: Bool, cors: [(String, String)], tools: Tools,
        respond: @escaping @Sendable (HTTPResponse) -> Void
    ) {
        self.tools = tools
        self.request = request
        self.requestId = RunLoopService.requestId(for: request)
        self.cors = cors
        self.isAPI = isAPI
        changes = RequestKind.changesState(method: request.method, path: request.path)
        arrivedAt = changes ? Date() : .distantPast
        // Read per request: SIGHUP may change the level.
        let level: Logger.Level = LocalStage.probePaths.contains(request.path) ? .debug : .info
        accessLevel = tools.logger.logLevel <= level ? level : nil
        self.respond = respond
    }

    /// Finishes and sends `response`, counted under `route`.
    func finish(_ response: HTTPResponse, route: String) {
        var response = response
        decorate(&response, dashboard: route == "static")
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
        // Before the answer leaves: the client's next request arrives after it.
        let answeredAt = changes ? Date() : .distantPast
        tools.metrics.recordRequest(route: route, status: response.status, seconds: seconds)
        if response.status == 429 || response.status == 503 {
            tools.metrics.recordRefusal(response.errorCode ?? "status_\(response.status)")
        }
        // Kept before it leaves too: a client that has its answer finds its
        // change in the journal (`GET /api/journal` right after it).
        if isAPI, changes, response.status != 401, response.status != 403, response.status != 503 {
            keep(response, answeredAt: answeredAt)
        }
        respond(response)
        if let accessLevel { log(response, route: route, seconds: seconds, level: accessLevel) }
    }

    /// One growth for all that is added here: X-Request-Id, CORS, the security headers.
    private func decorate(_ response: inout HTTPResponse, dashboard: Bool) {
        response.headers.reserveCapacity(response.headers.count + 1 + cors.count + SecurityHeaders.count)
        response.headers.append(("X-Request-Id", requestId))
        response.headers.append(contentsOf: cors)
        SecurityHeaders.add(to: &response.headers, dashboard: dashboard)
    }

    /// A change into the journal (record and replay) and the history store.
    private func keep(_ response: HTTPResponse, answeredAt: Date) {
        let path = request.path + RunLoopService.queryString(request.query)
        tools.journal.record(
            method: request.method, path: path, body: request.body, status: response.status, answer: response.body,
            arrivedAt: arrivedAt, answeredAt: answeredAt)
        tools.history?.record(
            .request(
                method: request.method, path: path, status: response.status, requestId: requestId,
                body: request.body, answer: response.body), seq: tools.sequence.next())
    }

    private func log(_ response: HTTPResponse, route: String, seconds: Double, level: Logger.Level) {
        let entry = AccessLogEntry(
            method: request.method, path: request.path, status: response.status, requestId: requestId,
            route: route, seconds: seconds, peer: request.peer, at: Date(), level: level)
        if let accessLog = tools.accessLog {
            // Queued as data; the writer thread formats it.
            accessLog.record(entry)
        } else {
            tools.logger.log(level: level, "\(entry.message)", metadata: entry.metadata)
        }
    }
}
