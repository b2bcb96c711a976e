import MicroHTTP

/// One request on its way through the stages of the HTTP thread: the request,
/// the service's state as it found it, and the finisher every answer goes
/// through. Built once per request by `RunLoopService.handle`.
struct Exchange: Sendable {
    let request: HTTPRequest
    let state: ServiceSnapshot
    let finisher: ResponseFinisher

    /// `/api` or below it: routed on the control loop.
    var isAPI: Bool { finisher.isAPI }

    /// The metrics label of an answer given before routing: `unmatched` for
    /// `/api`, the probe's path, or `static`.
    var label: String { isAPI ? "unmatched" : LocalStage.label(request.path) }

    /// The template of the route the request would take, or `unmatched`: the
    /// label of a refusal before the hop (401, 403, 415), so a refused request
    /// is still counted under its route.
    var routeLabel: String {
        if case .matched(let route, _) = state.router.resolve(method: request.method, path: request.path) {
            return route.template
        }
        return label
    }

    /// An answer labelled as the request arrived.
    func answer(_ response: HTTPResponse) -> StageResult { .answer(response, route: label) }

    /// An answer labelled with the route the request would take.
    func refuse(_ response: HTTPResponse) -> StageResult { .answer(response, route: routeLabel) }
}
