import MicroHTTP

/// What one stage of the request path decided.
enum StageResult: Sendable {
    /// Not this stage's to answer: the next stage looks.
    case next
    /// Answer with this response, counted under `route` (the metrics label).
    case answer(HTTPResponse, route: String)
    /// The request is on its way elsewhere (the control loop, a scrape that
    /// waits for the fleet's health) and is answered there.
    case handedOn
}
