import MicroHTTP

/// Stage 2 (HTTP thread): everything outside `/api` is answered here, never
/// behind the token: the probes (`/healthz`, `/readyz`), the Prometheus scrape
/// (`/metrics`) and the dashboard's static files. Composed once, at start, into
/// the path the HTTP server holds: it holds the service weakly (the server is
/// the service's), and reads it only for a request outside `/api`.
struct LocalStage: RequestStage {
    weak let service: RunLoopService?

    /// The paths answered outside the control loop, GET only, never behind the token.
    static let probePaths = ["/healthz", "/readyz", "/metrics"]

    /// The metrics label for a non-API path (bounded set: never the raw path).
    static func label(_ path: String) -> String {
        probePaths.contains(path) ? path : "static"
    }

    func handle(_ exchange: Exchange, next: (Exchange) -> StageResult) -> StageResult {
        guard !exchange.isAPI else { return next(exchange) }
        let request = exchange.request
        let path = request.path
        if Self.probePaths.contains(path), request.method != "GET" && request.method != "HEAD" {
            return exchange.answer(
                APIResponses.error(
                    status: 405, code: .methodNotAllowed,
                    message: "\(request.method) is not allowed on \(path); allowed: GET, HEAD",
                    headers: [("Allow", "GET, HEAD")]))
        }
        if path == "/healthz" { return exchange.answer(APIResponses.json(200, ["status": "ok"])) }
        // Gone only once the service is (its HTTP server answers 503 first).
        guard let service else {
            return exchange.answer(GuardStage.unavailable(code: .shuttingDown, "runloopd is stopping"))
        }
        switch path {
        case "/readyz":
            return exchange.answer(Self.readiness(exchange.state, service: service))
        case "/metrics":
            Self.scrape(exchange, service: service)
            return .handedOn
        default:
            return exchange.answer(
                service.staticFiles.response(for: request)
                    ?? APIResponses.error(status: 404, code: .notFound, message: "no such page \(path)"))
        }
    }

    /// `/readyz`: 200 once started and `--setup` applied; 503 while draining,
    /// starting or stopping, and while the history store refuses this
    /// instance's configuration (TLS, password, a newer file: retrying as it
    /// is cannot help, so the pod must not take traffic unseen).
    private static func readiness(_ state: ServiceSnapshot, service: RunLoopService) -> HTTPResponse {
        if state.draining {
            // SIGTERM's drain: out of the load balancer, still serving.
            return GuardStage.unavailable(code: .notReady, "runloopd is draining before it stops")
        }
        guard let control = state.control, control.isRunning else {
            return GuardStage.unavailable(code: .notReady, "runloopd is starting or stopping")
        }
        if let refusal = service.history?.refusal {
            return GuardStage.unavailable(
                code: .notReady, "the history store refuses this configuration: \(refusal)")
        }
        let threads = Double(service.registry.workerCount)
        return APIResponses.json(200, ["status": "ready", "threads": .number(threads)])
    }

    /// `/metrics`: with a store, the fleet's health is read first (a bounded wait).
    private static func scrape(_ exchange: Exchange, service: RunLoopService) {
        let queued = exchange.state.loop?.commands.pendingCount ?? 0
        let answer: @Sendable () -> Void = {
            exchange.finisher.finish(service.metricsExposition(queued: queued), route: exchange.label)
        }
        if let history = service.history { service.metrics.fleet.refresh(history, done: answer) } else { answer() }
    }
}

extension RunLoopService {
    /// The Prometheus exposition of this moment.
    func metricsExposition(queued: Int) -> HTTPResponse {
        let workers = registry.allWorkers
        let server = running.withLock { $0.server }
        let sample = ServiceMetrics.Sample(
            threads: workers.map(\.snapshot),
            utilizations: workers.filter { !$0.hasExited }.compactMap { $0.load().utilization },
            warningsActive: registry.diagnostics.warnings.activeCounts(), queued: queued,
            eventClients: hub.clientCount, eventClientsDropped: hub.droppedClients,
            connections: server?.connectionCounts,
            version: Self.version, storeKind: history?.store.kind ?? "none",
            store: history?.status, fleet: history == nil ? nil : metrics.fleet.counts,
            nestedRunsRefused: registry.diagnostics.nestedRunsRefused,
            livelocks: registry.diagnostics.livelocksDetected, maxNesting: registry.limits.maxNesting,
            predictSteps: registry.diagnostics.predictSteps,
            predictionsGivenUp: registry.diagnostics.predictionsGivenUp,
            offloadQueued: offloads.all.map { ($0.name, $0.queued) }, journal: journal.usage,
            journalLimit: journal.maxBytes)
        return HTTPResponse(
            status: 200, headers: [("Content-Type", "text/plain; version=0.0.4; charset=utf-8")],
            body: metrics.exposition(sample))
    }
}
