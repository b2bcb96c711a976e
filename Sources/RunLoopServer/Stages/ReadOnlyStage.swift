import MicroHTTP

/// Stage 4 (HTTP thread, before the hop): `--read-only` refuses every
/// state-changing method with 403.
struct ReadOnlyStage: RequestStage {
    let readOnly: Bool

    func handle(_ exchange: Exchange, next: (Exchange) -> StageResult) -> StageResult {
        let method = exchange.request.method
        guard readOnly, method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE" else {
            return next(exchange)
        }
        return exchange.refuse(
            APIResponses.error(
                status: 403, code: .readOnly,
                message: "this runloopd is read-only (--read-only): \(method) is refused"
            ))
    }
}
