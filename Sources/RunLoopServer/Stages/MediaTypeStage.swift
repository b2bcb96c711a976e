import MicroHTTP

/// Stage 5 (HTTP thread, before the hop): a request body is JSON, said so by
/// `Content-Type: application/json`, or the request is answered 415.
struct MediaTypeStage: RequestStage {
    func handle(_ exchange: Exchange, next: (Exchange) -> StageResult) -> StageResult {
        let request = exchange.request
        guard request.method == "POST" || request.method == "PUT" || request.method == "PATCH", !request.body.isEmpty
        else { return next(exchange) }
        let type = request.headers["content-type"]?.lowercased() ?? ""
        guard !type.hasPrefix("application/json") else { return next(exchange) }
        return exchange.refuse(
            APIResponses.error(
                status: 415, code: .unsupportedMediaType,
                message: "send the body as JSON with Content-Type: application/json"))
    }
}
