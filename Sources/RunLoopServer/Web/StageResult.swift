import MicroHTTP

/// What one stage of the request path decided (`RequestStage`); a stage that
/// lets the rest of the path look returns what its `next` returned.
enum StageResult: Sendable {
    /// Answer with this response, counted under `route` (the metrics label).
    case answer(HTTPResponse, route: String)
    /// The request is on its way elsewhere (the control loop, a scrape that
    /// waits for the fleet's health, a deferred handler) and is answered there.
    case handedOn
}
