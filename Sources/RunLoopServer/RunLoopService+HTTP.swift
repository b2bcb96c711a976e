import MicroHTTP
import CMicroHTTPD
import CoreFoundation
import Foundation
import Logging
import Primitives
import RunLoopCore

/// The HTTP thread side of the service: libmicrohttpd's threads call `handle`
/// for every request (through the `Forwarder`). Probes, metrics, preflights
/// and static files are answered here; `/api/*` goes to the control loop.
extension RunLoopService {
    /// Called on a libmicrohttpd thread (through the `Forwarder`): first the
    /// `RequestGuard` (Host and Origin), then `/api/*` goes to the control loop;
    /// preflights, probes, metrics and static files are answered here. Every
    /// answer gets an `X-Request-Id`, the security headers, an access-log line
    /// and its metrics.
    func handle(_ request: HTTPRequest, respond: @escaping @Sendable (HTTPResponse) -> Void) {
        let path = request.path
        let isAPI = path == "/api" || path.hasPrefix("/api/")
        let route = isAPI ? "unmatched" : Self.route(path)
        let trace = RequestTrace(requestId: Self.requestId(for: request), route: route)
        let logger = self.logger
        let accessLog = self.accessLog
        // Probes and scrapes are logged at debug, the rest at info; the level
        // is read per request (SIGHUP may change it).
        let accessLevel: Logger.Level = Self.probePaths.contains(path) ? .debug : .info
        let logsAccess = logger.logLevel <= accessLevel
        let metrics = self.metrics
        // One look at the running state per request: the guard, the control loop
        // (none for /api while --setup is applied: nobody sees a half-built setup).
        let (requestGuard, control, settingUp, starting, draining) = running.withLock {
            (
                $0.requestGuard, $0.accepting && !$0.applyingSetup ? $0.control : nil,
                $0.applyingSetup, !$0.accepting && !$0.stopped, $0.draining
            )
        }
        let isDashboard = route == "static"
        let changes = request.method == "POST" || request.method == "DELETE"
        let journal = changes ? self.journal : nil
        // The journal keeps when a change arrived and when it was answered (the
        // replay's waits and background steps); a read needs neither.
        let arrivedAt = changes ? Date() : .distantPast
        let history = changes ? self.history : nil
        let sequence = self.sequence
        let origin = request.headers["origin"]
        let cors =
            isAPI && origin != nil && request.method != "OPTIONS"
            ? (requestGuard?.corsHeaders(origin: origin, host: request.headers["host"]) ?? []) : []
        let answer: @Sendable (HTTPResponse) -> Void = { response in
            var response = response
            // One growth for all that is added here: X-Request-Id, CORS, the security headers.
            response.headers.reserveCapacity(response.headers.count + 1 + cors.count + SecurityHeaders.count)
            response.headers.append(("X-Request-Id", trace.requestId))
            response.headers.append(contentsOf: cors)
            SecurityHeaders.add(to: &response.headers, dashboard: isDashboard)
            let seconds = Double(DispatchTime.now().uptimeNanoseconds - trace.started) / 1e9
            // Before the answer leaves: the client's next request arrives after it.
            let answeredAt = changes ? Date() : .distantPast
            let route = trace.route
            metrics.recordRequest(route: route, status: response.status, seconds: seconds)
            if response.status == 429 || response.status == 503 {
                metrics.recordRefusal(response.errorCode ?? "status_\(response.status)")
            }
            respond(response)
            if isAPI, changes, response.status != 401, response.status != 403, response.status != 503 {
                let path = request.path + Self.queryString(request.query)
                journal?.record(
                    method: request.method, path: path, body: request.body, status: response.status,
                    answer: response.body, arrivedAt: arrivedAt, answeredAt: answeredAt)
                history?.record(
                    .request(
                        method: request.method, path: path, status: response.status, requestId: trace.requestId,
                        body: request.body, answer: response.body), seq: sequence.next())
            }
            guard logsAccess else { return }
            let entry = AccessLogEntry(
                method: request.method, path: request.path, status: response.status, requestId: trace.requestId,
                route: route, seconds: seconds, peer: request.peer, at: Date(), level: accessLevel)
            if let accessLog {
                // Queued as data; the writer thread formats it.
                accessLog.record(entry)
            } else {
                logger.log(level: accessLevel, "\(entry.message)", metadata: entry.metadata)
            }
        }
        // Before anything else: a foreign Host or Origin changes nothing.
        guard let requestGuard else {
            answer(
                APIResponses.error(
                    status: 503, code: "shutting_down", message: "runloopd is not accepting requests",
                    headers: [("Retry-After", "1")]))
            return
        }
        let verdict = requestGuard.check(
            method: request.method, host: request.headers["host"], origin: origin,
            referer: request.headers["referer"])
        if case .refuse(let status, let code, let message, let field) = verdict {
            answer(
                APIResponses.refusal(
                    HTTPRefusal(
                        status: status, code: code, message: message, field: field,
                        headers: [("Cache-Control", "no-store")])))
            return
        }
        if isAPI, request.method == "OPTIONS", let origin, request.headers["access-control-request-method"] != nil {
            // A CORS preflight from an allowed origin (the guard refused the rest).
            // Answered here: preflights never carry the token.
            answer(HTTPResponse(status: 204, headers: requestGuard.preflightHeaders(origin: origin)))
            return
        }
        if isAPI {
            // `accepting` is true only while the control loop runs (stop clears it first).
            guard let control else {
                answer(
                    APIResponses.error(
                        status: 503, code: settingUp || starting ? "not_ready" : "shutting_down",
                        message: settingUp
                            ? "runloopd is applying its --setup"
                            : starting ? "runloopd is starting" : "runloopd is not accepting requests",
                        headers: [("Retry-After", "1")]))
                return
            }
            // The one path every API request takes: into the control worker's
            // command buffer, then CFRunLoopSourceSignal + CFRunLoopWakeUp.
            let job = Job(request: request, respond: answer, trace: trace, postedAt: Monotonic.now())
            guard control.send(job) else {
                answer(
                    APIResponses.error(
                        status: 503, code: "overloaded",
                        message: "\(configuration.maxQueuedRequests) requests are already queued for the control loop",
                        headers: [("Retry-After", "1")]))
                return
            }
            return
        }
        if Self.probePaths.contains(path), request.method != "GET" && request.method != "HEAD" {
            answer(
                APIResponses.error(
                    status: 405, code: "method_not_allowed",
                    message: "\(request.method) is not allowed on \(path); allowed: GET, HEAD",
                    headers: [("Allow", "GET, HEAD")]))
            return
        }
        switch path {
        case "/healthz":
            answer(APIResponses.json(200, ["status": "ok"]))
        case "/readyz":
            if draining {
                // SIGTERM's drain: out of the load balancer, still serving.
                answer(
                    APIResponses.error(
                        status: 503, code: "not_ready", message: "runloopd is draining before it stops",
                        headers: [("Retry-After", "1")]))
            } else if isReady, !settingUp {
                answer(
                    APIResponses.json(200, ["status": "ready", "threads": .number(Double(registry.allWorkers.count))]))
            } else {
                answer(
                    APIResponses.error(
                        status: 503, code: "not_ready", message: "runloopd is starting or stopping",
                        headers: [("Retry-After", "1")]))
            }
        case "/metrics":
            let history = self.history
            let scrape: @Sendable () -> Void = { [self] in
                let workers = registry.allWorkers
                let sample = ServiceMetrics.Sample(
                    threads: workers.map(\.snapshot),
                    utilizations: workers.filter { !$0.hasExited }.compactMap { $0.load().utilization },
                    warningsActive: registry.diagnostics.warnings.activeCounts(),
                    queued: running.withLock { $0.control }?.commands.pendingCount ?? 0,
                    eventClients: hub.clientCount, version: Self.version, storeKind: history?.store.kind ?? "none",
                    store: history?.status, fleet: history == nil ? nil : metrics.fleet.counts)
                answer(
                    HTTPResponse(
                        status: 200, headers: [("Content-Type", "text/plain; version=0.0.4; charset=utf-8")],
                        body: metrics.exposition(sample)))
            }
            // With a store, the fleet's health is read first (bounded wait).
            if let history { metrics.fleet.refresh(history, done: scrape) } else { scrape() }
        default:
            if let response = staticFiles.response(for: request) {
                answer(response)
            } else {
                answer(APIResponses.error(status: 404, code: "not_found", message: "no such page \(path)"))
            }
        }
    }

    /// The caller's `X-Request-Id` when it is short and printable, else one
    /// made here: this boot's prefix and the request's number
    /// (`k7q2m9xa-17`), so ids differ across instances and restarts.
    static func requestId(for request: HTTPRequest) -> String {
        if let given = request.headers["x-request-id"], !given.isEmpty, given.utf8.count <= 128,
            given.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7f })
        {
            return given
        }
        return bootPrefix + String(request.id)
    }

    /// Eight random base-36 characters (about 41 bits) drawn once per process,
    /// then `-`: a shared prefix is expected only after some 1.5 million boots
    /// (the birthday bound), far beyond any fleet's history.
    static let bootPrefix: String = {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("0123456789abcdefghijklmnopqrstuvwxyz")
        return String((0..<8).map { _ in alphabet[Int(generator.next() % 36)] }) + "-"
    }()

    /// `?k=v&…` (sorted, percent-encoded) for a parsed query; "" when empty.
    static func queryString(_ query: [String: String]) -> String {
        guard !query.isEmpty else { return "" }
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        let pairs = query.keys.sorted().map { key in
            let value = query[key] ?? ""
            return
                "\(key.addingPercentEncoding(withAllowedCharacters: allowed) ?? key)=\(value.addingPercentEncoding(withAllowedCharacters: allowed) ?? value)"
        }
        return "?" + pairs.joined(separator: "&")
    }

    /// The paths answered outside the control loop, GET only, never behind the token.
    static let probePaths = ["/healthz", "/readyz", "/metrics"]

    /// The metrics label for a non-API path (bounded set: never the raw path).
    static func route(_ path: String) -> String {
        probePaths.contains(path) ? path : "static"
    }
}
