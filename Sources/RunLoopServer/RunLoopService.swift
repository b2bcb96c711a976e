import CMicroHTTPD
import CoreFoundation
import Foundation
import Logging
import RunLoopCore

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
    }

    /// Creates the service (nothing runs until `start`).
    public init(configuration: ServiceConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
        let hubBox = HubBox()
        self.registry = WorkerRegistry(limits: configuration.limits) { event in hubBox.hub?.publish(event) }
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
        commands = CommandSource<Job>(capacity: configuration.maxQueuedRequests) { [weak self] batch in
            self?.handle(batch)
        }
        commands.add(to: control.runLoop, mode: .default)

        let api = API(
            registry: registry, events: hub, limits: configuration.api, version: versionValue(),
            openAPI: { OpenAPIDocument.document(limits: self.configuration) })
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
    /// probes and static files are answered here.
    public func handle(_ request: HTTPRequest, respond: @escaping @Sendable (HTTPResponse) -> Void) {
        let path = request.path
        if path == "/api" || path.hasPrefix("/api/") {
            guard isReady else {
                respond(
                    APIResponses.error(
                        status: 503, code: "shutting_down", message: "runloopd is not accepting requests",
                        headers: [("Retry-After", "1")]))
                return
            }
            // The one path every API request takes: into the control worker's
            // command buffer, then CFRunLoopSourceSignal + CFRunLoopWakeUp.
            guard commands.send(Job(request: request, respond: respond), to: control.runLoop) else {
                respond(
                    APIResponses.error(
                        status: 503, code: "overloaded",
                        message: "\(configuration.maxQueuedRequests) requests are already queued for the control loop",
                        headers: [("Retry-After", "1")]))
                return
            }
            return
        }
        if path == "/healthz" || path == "/readyz", request.method != "GET" && request.method != "HEAD" {
            respond(
                APIResponses.error(
                    status: 405, code: "method_not_allowed",
                    message: "\(request.method) is not allowed on \(path); allowed: GET, HEAD",
                    headers: [("Allow", "GET, HEAD")]))
            return
        }
        switch path {
        case "/healthz":
            respond(APIResponses.json(200, ["status": "ok"]))
        case "/readyz":
            if isReady {
                respond(
                    APIResponses.json(200, ["status": "ready", "threads": .number(Double(registry.allWorkers.count))]))
            } else {
                respond(
                    APIResponses.error(
                        status: 503, code: "not_ready", message: "runloopd is starting or stopping",
                        headers: [("Retry-After", "1")]))
            }
        default:
            if let response = staticFiles.response(for: request) {
                respond(response)
            } else {
                respond(APIResponses.error(status: 404, code: "not_found", message: "no such page \(path)"))
            }
        }
    }

    // MARK: - Control loop side

    /// The control worker's command source perform routine: one batch of
    /// requests, in arrival order, on the control thread.
    private func handle(_ batch: [Job]) {
        for job in batch { dispatch(job) }
    }

    private func dispatch(_ job: Job) {
        let request = job.request
        if ["POST", "PUT", "PATCH"].contains(request.method), !request.body.isEmpty {
            let type = request.headers["content-type"]?.lowercased() ?? ""
            guard type.hasPrefix("application/json") else {
                job.respond(
                    APIResponses.error(
                        status: 415, code: "unsupported_media_type",
                        message: "send the body as JSON with Content-Type: application/json"))
                return
            }
        }
        guard let resolved = router.resolve(method: request.method, path: request.path) else {
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
