import Foundation
import MicroHTTP

/// Stage 3 (HTTP thread, before the hop): with `--token`, every `/api`
/// request carries it, or is answered 401 without taking a place in the
/// control loop's queue.
struct AuthenticationStage: RequestStage {
    func handle(_ exchange: Exchange, next: (Exchange) -> StageResult) -> StageResult {
        guard let token = exchange.state.token, !Self.authorized(exchange.request, token: token) else {
            return next(exchange)
        }
        return exchange.refuse(
            APIResponses.error(
                status: 401, code: .unauthorized,
                message: "this runloopd needs a token: send Authorization: Bearer <token>",
                headers: [("WWW-Authenticate", "Bearer realm=\"runloopd\"")]))
    }

    /// Whether the request carries the token: `Authorization: Bearer <token>`,
    /// or `?access_token=` on the event stream (for older clients; the
    /// dashboard sends the header). Compared in constant time.
    static func authorized(_ request: HTTPRequest, token: String) -> Bool {
        guard let presented = presentedToken(request) else { return false }
        return constantTimeEqual(Array(presented.utf8), Array(token.utf8))
    }

    /// The token a request presents (`Authorization: Bearer`, or
    /// `?access_token=` on the event stream), or nil.
    static func presentedToken(_ request: HTTPRequest) -> String? {
        var presented: String?
        if let header = request.headers["authorization"] {
            let parts = header.split(separator: " ", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == "bearer" {
                presented = parts[1].trimmingCharacters(in: .whitespaces)
            }
        }
        if presented == nil, request.path == "/api/events" { presented = request.query["access_token"] }
        return presented
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
}
