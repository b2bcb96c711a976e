import MicroHTTP

/// The request path, composed once when the service starts (`start()`), as
/// two responders: the HTTP thread's stages 1–6, ending in the hop, and the
/// control loop's gate and router. The HTTP server's handler holds `http`,
/// the control loop's handler `control`; neither holds the service (the local
/// stage's reference is weak), so the service still deinitialises after `stop()`.
struct RequestPaths: Sendable {
    /// Guard → local → authentication → read-only → media type → the hop.
    let http: StageResponder<Exchange>
    /// The gate (wake-up latency, stopping) → the router; 404 at its end.
    let control: StageResponder<RunLoopService.Job>

    init(service: RunLoopService) {
        let configuration = service.configuration
        http = StageResponder(
            GuardStage()
                .then(LocalStage(service: service))
                .then(AuthenticationStage())
                .then(ReadOnlyStage(readOnly: configuration.readOnly))
                .then(MediaTypeStage())
                .then(ControlHop(maxQueued: configuration.maxQueuedRequests)),
            end: Self.notAccepting)
        control = StageResponder(
            ControlGate(metrics: service.metrics, stopping: service.stopping).then(RouterStage()),
            end: RouterStage.notFound)
    }

    /// The end of the HTTP path, reached only when the hop finds no control
    /// loop (the guard stage answers that case first).
    static func notAccepting(_ exchange: Exchange) -> StageResult {
        exchange.answer(GuardStage.unavailable(code: .shuttingDown, "runloopd is not accepting requests"))
    }
}
