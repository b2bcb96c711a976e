import MicroHTTP
import CLinux
import CMicroHTTPD
import CoreFoundation
import Foundation
import Logging
import Primitives
import RunLoopCore
import RunLoopStore
import Synchronization

/// runloopd: a libmicrohttpd server whose `/api` requests are posted, as
/// commands, into the control loop (custom source signal + `CFRunLoopWakeUp`),
/// handled there, and answered by resuming the suspended connection.
///
/// Threads: `handle` on libmicrohttpd's threads; `dispatch` on the control
/// loop; `start`/`stop` from the owner. State: what `start` builds and the
/// accepting/stopped flags are one `Locked`. Ownership: the service owns the
/// control loop, the HTTP server and the registry; none of them holds the
/// service (the HTTP server reaches it through a weak `Forwarder`, the control
/// loop's handler captures it weakly), so it deinitialises once its owner lets go.
public final class RunLoopService: Sendable {
    /// The version this build reports.
    public static let version = "0.1.0"
    /// The commit it was built from (`make release` names it), or "unknown".
    public static let commit = String(cString: clinux_build_commit())
    /// What `runloopd --version` prints: `0.1.0 (commit 1a429af0c1b2)`.
    public static var versionLine: String { "\(version) (commit \(commit))" }

    /// The configuration.
    public let configuration: ServiceConfiguration
    /// The workers.
    public let registry: WorkerRegistry
    let logger: Logger
    /// The access log's own writer (formats off the request path); nil: each
    /// line goes through `logger` (at `info`, probes and scrapes at `debug`).
    /// Whether a line is written at all follows the logger's level at the time.
    let accessLog: (any AccessLogWriter)?
    let hub: EventHub
    let metrics = ServiceMetrics()
    /// Where slow answers are built, beside the control loop.
    let offloads = OffloadQueues()
    let staticFiles: StaticFiles
    /// The state-changing requests answered, for record and replay.
    let journal: Journal
    /// What every answer's finisher uses (metrics, journal, store, logs).
    let finishing: ResponseFinisher.Tools
    /// Set when `stop` begins: the control loop answers what is still queued 503.
    let stopping = StopFlag()
    /// The experiment files, read once.
    let experiments: ExperimentLibrary
    /// When this process started (seconds since 1970).
    let startedAt = Date().timeIntervalSince1970
    /// Event ids shared by the event stream and the store.
    let sequence = EventSequence()
    /// The history store's recorder (nil: `--no-store`, or the store named cannot be made).
    let history: HistoryRecorder?
    /// Why the store named cannot be made (`start` refuses then).
    let storeProblem: String?

    struct Running {
        var control: ControlLoop<Job>?
        var router = Router().buildResponder()
        var server: HTTPServer?
        var requestGuard: RequestGuard?
        var accepting = false
        var stopped = false
        /// While `--setup` is applied: only its own requests reach the control
        /// loop (`/api` answers 503) and `/readyz` is not ready yet.
        var applyingSetup = false
        /// SIGTERM's drain: `/readyz` answers 503 so a load balancer takes this
        /// instance out, while every other request is still served.
        var draining = false
        /// The bearer token `/api` requires (nil: none); `replaceToken` swaps it (SIGHUP).
        var token: String?
    }

    let running = Locked(Running())

    /// The HTTP server's handler: reaches the service without keeping it alive.
    private final class Forwarder: HTTPRequestHandler {
        weak let service: RunLoopService?
        /// The HTTP thread's stages, composed at start (`RequestPaths`).
        let path: StageResponder<Exchange>
        init(_ service: RunLoopService, path: StageResponder<Exchange>) {
            self.service = service
            self.path = path
        }
        func handle(_ request: HTTPRequest, respond: @escaping @Sendable (HTTPResponse) -> Void) {
            guard let service else {
                respond(APIResponses.error(status: 503, code: .shuttingDown, message: "runloopd is stopping"))
                return
            }
            service.handle(request, path: path, respond: respond)
        }
        func response(for refusal: HTTPRefusal) -> HTTPResponse { APIResponses.refusal(refusal) }
    }

    /// Creates the service (nothing runs until `start`).
    public init(configuration: ServiceConfiguration, logger: Logger, accessLog: (any AccessLogWriter)? = nil) {
        self.configuration = configuration
        self.logger = logger
        // Kept whatever the level now: SIGHUP may lower it later (`handle` checks it per request).
        self.accessLog = accessLog
        let hub = EventHub(
            maxClients: configuration.api.maxEventClients,
            maxClientsPerAddress: configuration.api.maxEventClientsPerAddress,
            snapshotMs: configuration.api.streamSnapshotMs,
            maxBytesPerSecond: configuration.api.streamMaxBytesPerSecond,
            sseBufferBytes: configuration.http.sseBufferBytes)
        let metrics = self.metrics
        let sequence = self.sequence
        let recorder = Locked<HistoryRecorder?>(nil)
        self.registry = WorkerRegistry(limits: configuration.limits, diagnostics: configuration.diagnostics) { event in
            metrics.record(event)
            Self.logNotable(event, logger: logger)
            let id = sequence.next()
            // Kept before it is published: a stream resumed by Last-Event-ID
            // finds every event it missed either in the store or on the air.
            if HistoryRecorder.keeps(event), let history = recorder.withLock({ $0 }) {
                history.record(.event(event), seq: id)
            }
            hub.publish(event, id: id)
        } listingChanged: { [weak hub] ids in
            hub?.listingChanged(ids)
        }
        var history: HistoryRecorder?
        var storeProblem: String?
        if configuration.store.enabled {
            do {
                history = HistoryRecorder(
                    store: try configuration.store.makeStore(logger: logger), options: configuration.store,
                    sequence: sequence, warnings: registry.diagnostics.warnings, logger: logger)
            } catch {
                storeProblem = "\(error)"
            }
        }
        recorder.withLock { $0 = history }
        self.history = history
        self.storeProblem = storeProblem
        hub.history = history
        hub.registry = registry
        self.hub = hub
        self.staticFiles =
            configuration.publicDirectory.isEmpty
            ? StaticFiles(files: EmbeddedContent.publicFiles, refusals: APIResponses.refusal)
            : StaticFiles(root: configuration.publicDirectory, refusals: APIResponses.refusal)
        self.journal = Journal(
            capacity: configuration.journalSize, maxBytes: configuration.journalBytes,
            maxExportBytes: configuration.maxExportBytes)
        self.finishing = ResponseFinisher.Tools(
            metrics: metrics, journal: journal, history: history, sequence: sequence, accessLog: accessLog,
            logger: logger)
        self.experiments = ExperimentLibrary.load(configuration.experimentsDirectory)
        for problem in experiments.problems { logger.warning("experiment skipped: \(problem)") }
        running.withLock { $0.token = configuration.token }
    }

    /// Stalls and loop warnings in the log (they are events too): a stall
    /// crossing a threshold and a warning raised or made more severe at
    /// `warning`; a stall's end and a warning cleared at `info`. Called where
    /// the event happens, never under a lock (the log only queues the line).
    static func logNotable(_ event: RunLoopEvent, logger: Logger) {
        switch event {
        case .stall(let stall, let change):
            logger.warning(
                "stall: a \(stall.callout.kind.rawValue) callout on \(stall.thread) has run \(Int(stall.ms)) ms (\(stall.severity))",
                metadata: [
                    "thread": .string(stall.thread), "stall": .string(stall.id), "severity": .string(stall.severity),
                    "ms": .stringConvertible(stall.ms.rounded()), "change": .string(change.rawValue),
                    "callout": .string(stall.callout.id), "kind": .string(stall.callout.kind.rawValue),
                ])
        case .stallEnded(let stall):
            logger.info(
                "stall ended: the callout returned after \(Int(stall.ms)) ms",
                metadata: [
                    "thread": .string(stall.thread), "stall": .string(stall.id), "severity": .string(stall.severity),
                    "ms": .stringConvertible(stall.ms.rounded()),
                ])
        case .warning(let warning) where warning.code != WarningCode.stall.rawValue:
            // A stall's own warning is the stall line above.
            // A service-wide warning (store_unavailable) has no thread: none is named.
            var metadata: Logger.Metadata = [
                "code": .string(warning.code), "severity": .string(warning.severity),
                "count": .stringConvertible(warning.count),
            ]
            if !warning.thread.isEmpty { metadata["thread"] = .string(warning.thread) }
            let subject = warning.thread.isEmpty ? "service-wide" : "on \(warning.thread)"
            if warning.active {
                logger.warning("warning raised: \(warning.message)", metadata: metadata)
            } else {
                logger.info("warning cleared: \(warning.code) \(subject)", metadata: metadata)
            }
        default:
            break
        }
    }

    /// The bound port (after `start`).
    public var port: UInt16 { running.withLock { $0.server }?.port ?? configuration.http.port }

    /// Starts the control loop, then the HTTP server.
    public func start() throws {
        if let storeProblem { throw StoreError(storeProblem) }
        // libdispatch's timer machinery (three descriptors for the process's life)
        // is set up here, not by the first request that waits.
        Deadlines.prepare()
        let paths = RequestPaths(service: self)
        let server = HTTPServer(
            configuration: configuration.http, handler: Forwarder(self, path: paths.http), logger: logger)
        let control = try ControlLoop<Job>(name: "rl-control", capacity: configuration.maxQueuedRequests) { batch in
            Self.handle(batch, server: server, path: paths.control)
        }
        let api = API(
            registry: registry, events: hub, limits: configuration.api, version: versionValue(), journal: journal,
            experiments: experiments, history: history, instance: { [weak self] in self?.instanceRecord() },
            openAPI: OpenAPIDocument.document(limits: configuration, selectors: registry.selectors.all),
            offloads: offloads)
        let requestGuard = try RequestGuard(
            boundHost: configuration.http.host, allowedHosts: configuration.allowedHosts,
            allowedOrigins: configuration.allowedOrigins)
        running.withLock {
            $0.control = control
            $0.router = api.makeRouter()
            $0.server = server
            $0.requestGuard = requestGuard
            // From the first connection on, /api says why it waits.
            $0.applyingSetup = configuration.setup != nil
        }
        do {
            try server.start()
        } catch {
            control.stop()
            throw error
        }
        // The store learns who we are once the port is bound (the default id and URL name it).
        history?.start(instance: instanceRecord(port: server.port))
        running.withLock { $0.accepting = true }
        logger.info(
            "runloopd listening",
            metadata: [
                "host": "\(configuration.http.host)", "port": .stringConvertible(Int(server.port)),
                "httpThreads": .stringConvertible(configuration.http.httpThreads),
            ])
        logger.info(
            "serving the dashboard and the experiments",
            metadata: ["dashboard": .string(served.dashboard), "experiments": .string(served.experiments)])
        if let setup = configuration.setup {
            do throws(Setup.Failure) {
                try applySetup(setup)
            } catch {
                stop()
                throw error
            }
            running.withLock { $0.applyingSetup = false }
        }
    }

    /// Where the dashboard and the experiments come from: compiled in, or the
    /// folders `--public-dir` and `--experiments-dir` name (absolute).
    public var served: ServedContent {
        let dashboard: String
        if let files = staticFiles.files {
            dashboard = "compiled in (\(files.count) files)"
        } else {
            let folder = (staticFiles.root as NSString).standardizingPath
            let absolute = folder.hasPrefix("/") ? folder : FileManager.default.currentDirectoryPath + "/" + folder
            let index = (absolute as NSString).appendingPathComponent(staticFiles.indexFile)
            let found = FileManager.default.fileExists(atPath: index)
            dashboard = found ? absolute : "\(absolute) (no \(staticFiles.indexFile) there)"
        }
        return ServedContent(dashboard: dashboard, experiments: experiments.origin)
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
    /// then the control loop, then the store's last batch.
    ///
    /// One deadline, `timeout` seconds away, bounds the whole stop; each step
    /// has its share and whatever the earlier steps left: the workers up to
    /// half of it (a busy handler is not waited for longer), the HTTP drain
    /// until 30 % is left, the control loop until 20 % is left (1 s at most),
    /// the store what remains (at least 10 %). Nothing here waits without a
    /// bound, so a SIGTERM ends the process within about `timeout` seconds
    /// whatever a handler, a client or the disk is doing.
    /// The token `/api` requires now.
    var token: String? { running.withLock { $0.token } }

    /// Replaces the token (a rotated `--token-file`, reread on SIGHUP): requests
    /// that reach the control loop from now on need the new one, and every
    /// event stream opened with another token ends now. Returns
    /// whether it changed. Whether a token is required at all does not change.
    @discardableResult
    public func replaceToken(_ token: String) -> Bool {
        let changed = running.withLock { r in
            guard r.token != nil, r.token != token else { return false }
            r.token = token
            return true
        }
        // A stream opened with the old token may not outlive it (after the lock: a close runs handlers).
        if changed { hub.endStreams(notPresenting: token) }
        return changed
    }

    /// This process for the store and `/api/fleet`: `--instance-id` (default
    /// host name and port) and `--advertise-url` (default from host and port).
    func instanceRecord(port: UInt16? = nil) -> InstanceRecord {
        if let history, history.instance.pid != 0 { return history.instance }
        let port = port ?? self.port
        let host = ProcessInfo.processInfo.hostName
        let bound = configuration.http.host
        let reachable = ["0.0.0.0", "::", ""].contains(bound) ? host : (bound.contains(":") ? "[\(bound)]" : bound)
        let now = Date().timeIntervalSince1970
        return InstanceRecord(
            id: configuration.store.instanceId ?? configuration.store.rememberedInstanceId(fallback: "\(host)-\(port)"),
            url: configuration.store.advertiseURL ?? "http://\(reachable):\(port)/", version: Self.version, host: host,
            pid: Int64(getpid()), startedAt: startedAt, heartbeatAt: now)
    }

    #if DEBUG
        /// Test-only faults (debug builds; `RUNLOOPD_TEST_FAULT`). `stuck-lock`:
        /// a thread takes the event hub's lock and never lets go, as the freeze
        /// of issue 22 did, so every publish and the stop's `closeAll` wait forever.
        public func injectTestFault(_ fault: String) {
            switch fault {
            case "stuck-lock": hub.holdLockForever()
            default: logger.warning("unknown test fault", metadata: ["fault": "\(fault)"])
            }
        }
    #endif
}
