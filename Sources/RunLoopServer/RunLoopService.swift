import CMicroHTTPD
import CoreFoundation
import Foundation
import Logging
import RunLoopCore
import Synchronization

/// Everything runloopd is configured with.
public struct ServiceConfiguration: Sendable {
    /// The HTTP layer's address, threads and bounds.
    public var http = HTTPServerConfiguration()
    /// The engine's bounds.
    public var limits = Limits()
    /// The control plane's bounds.
    public var api = APILimits()
    /// Requests queued for the control loop and not yet handled; beyond it 503.
    public var maxQueuedRequests = 4096
    /// The dashboard folder served at `/`.
    public var publicDirectory = "Public"
    /// When set, every `/api` request needs `Authorization: Bearer <token>`
    /// (`/healthz`, `/readyz` and `/metrics` stay open for probes and scrapers).
    public var token: String?
    /// When true, every mutating API call (POST, PUT, PATCH, DELETE) answers 403.
    public var readOnly = false

    /// The defaults.
    public init() {}
}

/// runloopd: a libmicrohttpd server whose `/api` requests are posted, as
/// commands, into the control worker's run loop (custom source signal +
/// `CFRunLoopWakeUp`), handled there, and answered by resuming the suspended
/// connection.
public final class RunLoopService: HTTPRequestHandler, @unchecked Sendable {
    /// The version this build reports.
    public static let version = "0.1.0"

    /// The configuration.
    public let configuration: ServiceConfiguration
    /// The workers.
    public let registry: WorkerRegistry
    private let logger: Logger
    private let hub: EventHub
    private let metrics = ServiceMetrics()
    private let staticFiles: StaticFiles
    private var control: Worker! = nil
    private var commands: CommandSource<Job>! = nil
    private var router = Router()
    private var server: HTTPServer! = nil
    private let stateLock = NSLock()
    private var accepting = false
    private var stopped = false

    /// One HTTP request on its way to the control loop.
    struct Job: Sendable {
        let request: HTTPRequest
        let respond: @Sendable (HTTPResponse) -> Void
        let trace: RequestTrace
        let postedAt: Double
    }

    /// Per-request bookkeeping for the access log and metrics: the route
    /// template is filled in by the control loop once the request is routed.
    final class RequestTrace: Sendable {
        let started = DispatchTime.now().uptimeNanoseconds
        let requestId: String
        private let routeTemplate: Mutex<String>

        init(requestId: String, route: String) {
            self.requestId = requestId
            self.routeTemplate = Mutex(route)
        }

        var route: String {
            get { routeTemplate.withLock { $0 } }
            set { routeTemplate.withLock { $0 = newValue } }
        }
    }

    /// Creates the service (nothing runs until `start`).
    public init(configuration: ServiceConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
        let hubBox = HubBox()
        let metrics = self.metrics
        self.registry = WorkerRegistry(limits: configuration.limits) { event in
            metrics.record(event)
            hubBox.hub?.publish(event)
        }
        let registry = self.registry
        self.hub = EventHub(maxClients: configuration.api.maxEventClients) {
            registry.allWorkers.map { Rep.thread($0.snapshot) }
        }
        hubBox.hub = hub
        self.staticFiles = StaticFiles(root: configuration.publicDirectory)
    }

    private final class HubBox: @unchecked Sendable {
        var hub: EventHub?
    }

    /// The bound port (after `start`).
    public var port: UInt16 { server?.port ?? configuration.http.port }

    /// Starts the control loop, then the HTTP server.
    public func start() throws {
        // The control worker is an ordinary worker (port keep-alive, one long
        // run per turn of its loop), never listed among user threads.
        control = try Worker(
            id: "control",
            options: WorkerOptions(
                name: "rl-control", keepAlive: .port, policy: RunPolicy(style: .loop, seconds: 86_400)),
            limits: configuration.limits, selectors: registry.selectors)
        commands = CommandSource<Job>(capacity: configuration.maxQueuedRequests, coalescingWakeUps: true) {
            [weak self] batch in
            self?.handle(batch)
        }
        commands.add(to: control.runLoop, mode: .default)

        let api = API(
            registry: registry, events: hub, limits: configuration.api, version: versionValue(),
            openAPI: OpenAPIDocument.document(limits: configuration, selectors: registry.selectors.all))
        router = api.makeRouter()
        server = HTTPServer(configuration: configuration.http, handler: self, logger: logger)
        try server.start()
        stateLock.lock()
        accepting = true
        stateLock.unlock()
        logger.info(
            "runloopd listening",
            metadata: [
                "host": "\(configuration.http.host)", "port": "\(server.port)",
                "httpThreads": "\(configuration.http.httpThreads)",
            ])
    }

    private func versionValue() -> Value {
        [
            "name": "runloopd", "version": .string(Self.version),
            "libmicrohttpd": .string(String(cString: MHD_get_version())),
            "swift": "6", "runLoop": "CoreFoundation (swift-corelibs-foundation), epoll + eventfd + timerfd",
        ]
    }

    /// Graceful stop: stop accepting, answer every suspended request, end the
    /// event streams, stop and join every worker (logging each final exit),
    /// then the control loop. Returns within about `timeout` seconds.
    public func stop(timeout: Double = 4) {
        stateLock.lock()
        if stopped {
            stateLock.unlock()
            return
        }
        stopped = true
        accepting = false
        stateLock.unlock()
        logger.info("runloopd stopping")
        hub.closeAll()
        let results = registry.endAll(timeout: timeout * 0.6)
        for (id, snapshot) in results {
            if let snapshot {
                let exit = snapshot.lastExit.map { "\($0.reason.name) in \($0.mode)" } ?? "never ran"
                logger.info("thread ended", metadata: ["thread": "\(id)", "finalExit": "\(exit)"])
            } else {
                logger.warning("thread did not end in time (a handler is busy)", metadata: ["thread": "\(id)"])
            }
        }
        server?.stop()
        if let control {
            for job in commands?.drain() ?? [] {
                job.respond(APIResponses.error(status: 503, code: "shutting_down", message: "runloopd is stopping"))
            }
            _ = control.endAndWait(timeout: 1)
        }
        logger.info("runloopd stopped")
    }

    /// Whether the service takes requests (for `/readyz`).
    public var isReady: Bool {
        stateLock.lock()
        defer { stateLock.unlock() }
        return accepting && !(control?.hasExited ?? true)
    }

    // MARK: - HTTP thread side

    /// Called on a libmicrohttpd thread: `/api/*` goes to the control loop;
    /// probes, metrics and static files are answered here. Every answer gets an
    /// `X-Request-Id`, an access-log line and its metrics.
    public func handle(_ request: HTTPRequest, respond: @escaping @Sendable (HTTPResponse) -> Void) {
        let path = request.path
        let isAPI = path == "/api" || path.hasPrefix("/api/")
        let trace = RequestTrace(requestId: Self.requestId(for: request), route: isAPI ? "unmatched" : Self.route(path))
        let logger = self.logger
        let metrics = self.metrics
        let answer: @Sendable (HTTPResponse) -> Void = { response in
            var response = response
            response.headers.append(("X-Request-Id", trace.requestId))
            let seconds = Double(DispatchTime.now().uptimeNanoseconds - trace.started) / 1e9
            let route = trace.route
            metrics.recordRequest(route: route, status: response.status, seconds: seconds)
            if response.status == 429 || response.status == 503 {
                metrics.recordRefusal(response.errorCode ?? "status_\(response.status)")
            }
            respond(response)
            logger.info(
                "\(request.method) \(request.path) \(response.status)",
                metadata: [
                    "requestId": "\(trace.requestId)", "route": "\(route)", "status": "\(response.status)",
                    "durationMs": "\((seconds * 1e6).rounded() / 1000)", "remote": "\(request.remoteAddress ?? "-")",
                ])
        }
        if isAPI {
            guard isReady, let loop = control?.runLoop else {
                answer(
                    APIResponses.error(
                        status: 503, code: "shutting_down", message: "runloopd is not accepting requests",
                        headers: [("Retry-After", "1")]))
                return
            }
            // The one path every API request takes: into the control worker's
            // command buffer, then CFRunLoopSourceSignal + CFRunLoopWakeUp.
            let job = Job(request: request, respond: answer, trace: trace, postedAt: Monotonic.now())
            guard commands.send(job, to: loop) else {
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
            if isReady {
                answer(
                    APIResponses.json(200, ["status": "ready", "threads": .number(Double(registry.allWorkers.count))]))
            } else {
                answer(
                    APIResponses.error(
                        status: 503, code: "not_ready", message: "runloopd is starting or stopping",
                        headers: [("Retry-After", "1")]))
            }
        case "/metrics":
            let body = metrics.exposition(
                threads: registry.allWorkers.map(\.snapshot), queued: commands?.pendingCount ?? 0,
                eventClients: hub.clientCount)
            answer(
                HTTPResponse(
                    status: 200, headers: [("Content-Type", "text/plain; version=0.0.4; charset=utf-8")], body: body))
        default:
            if let response = staticFiles.response(for: request) {
                answer(response)
            } else {
                answer(APIResponses.error(status: 404, code: "not_found", message: "no such page \(path)"))
            }
        }
    }

    /// The caller's `X-Request-Id` when it is short and printable, else `r<n>`.
    static func requestId(for request: HTTPRequest) -> String {
        if let given = request.headers["x-request-id"], !given.isEmpty, given.utf8.count <= 128,
            given.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7f })
        {
            return given
        }
        return "r\(request.id)"
    }

    /// The paths answered outside the control loop, GET only, never behind the token.
    static let probePaths = ["/healthz", "/readyz", "/metrics"]

    /// The metrics label for a non-API path (bounded set: never the raw path).
    static func route(_ path: String) -> String {
        switch path {
        case "/healthz", "/readyz", "/metrics": return path
        default: return "static"
        }
    }

    // MARK: - Control loop side

    /// The control worker's command source perform routine: one batch of
    /// requests, in arrival order, on the control thread.
    /// Whether the request carries the token: `Authorization: Bearer <token>`,
    /// or `?access_token=` on the event stream (EventSource cannot set headers).
    /// Compared in constant time.
    static func authorized(_ request: HTTPRequest, token: String) -> Bool {
        var presented: String?
        if let header = request.headers["authorization"] {
            let parts = header.split(separator: " ", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == "bearer" {
                presented = parts[1].trimmingCharacters(in: .whitespaces)
            }
        }
        if presented == nil, request.path == "/api/events" { presented = request.query["access_token"] }
        guard let presented else { return false }
        return constantTimeEqual(Array(presented.utf8), Array(token.utf8))
    }

    /// Compares without an early exit, so timing does not reveal a prefix.
    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var difference = UInt8(a.count == b.count ? 0 : 1)
        for index in 0..<max(a.count, b.count) {
            let x = index < a.count ? a[index] : 0
            let y = index < b.count ? b[index] : 0xFF
            difference |= x ^ y
        }
        return difference == 0
    }

    private func handle(_ batch: [Job]) {
        guard let server else {
            for job in batch { dispatch(job) }
            return
        }
        server.withBatchedResumes {
            for job in batch { dispatch(job) }
        }
    }

    private func dispatch(_ job: Job) {
        let request = job.request
        metrics.recordWakeup(seconds: Monotonic.now() - job.postedAt)
        guard isReady else {
            // Queued before a stop began: answered, but never acted on (no new
            // thread may start once every worker is being ended).
            job.respond(
                APIResponses.error(
                    status: 503, code: "shutting_down", message: "runloopd is stopping",
                    headers: [("Retry-After", "1")]))
            return
        }
        // Resolved once, first, so even a refused request is counted under its route.
        let resolved = router.resolve(method: request.method, path: request.path)
        if case .some(.some(let (route, _))) = resolved { job.trace.route = route.template }
        if let token = configuration.token, !Self.authorized(request, token: token) {
            job.respond(
                APIResponses.error(
                    status: 401, code: "unauthorized",
                    message: "this runloopd needs a token: send Authorization: Bearer <token>",
                    headers: [("WWW-Authenticate", "Bearer realm=\"runloopd\"")]))
            return
        }
        if configuration.readOnly, ["POST", "PUT", "PATCH", "DELETE"].contains(request.method) {
            job.respond(
                APIResponses.error(
                    status: 403, code: "read_only",
                    message: "this runloopd is read-only (--read-only): \(request.method) is refused"))
            return
        }
        if request.method == "POST" || request.method == "PUT" || request.method == "PATCH", !request.body.isEmpty {
            let type = request.headers["content-type"]?.lowercased() ?? ""
            guard type.hasPrefix("application/json") else {
                job.respond(
                    APIResponses.error(
                        status: 415, code: "unsupported_media_type",
                        message: "send the body as JSON with Content-Type: application/json"))
                return
            }
        }
        guard let resolved else {
            job.respond(APIResponses.error(status: 404, code: "not_found", message: "no endpoint \(request.path)"))
            return
        }
        guard let (route, params) = resolved else {
            let allow = router.allowedMethods(path: request.path).joined(separator: ", ")
            job.respond(
                APIResponses.error(
                    status: 405, code: "method_not_allowed",
                    message: "\(request.method) is not allowed on \(request.path); allowed: \(allow)",
                    headers: [("Allow", allow)]))
            return
        }
        let context = RouteContext(request: request, params: params, respond: job.respond)
        do throws(RunLoopError) {
            switch try route.handler(context) {
            case .json(let status, let value, let headers):
                job.respond(APIResponses.json(status, value, headers: headers))
            case .response(let response):
                job.respond(response)
            case .deferred:
                break
            }
        } catch {
            job.respond(APIResponses.error(error))
        }
    }
}
