import MicroHTTP
import Foundation
import Primitives

/// The request path on the HTTP thread: libmicrohttpd's threads call `handle`
/// for every request (through the `Forwarder`), which runs the stages that
/// `RequestPaths` composed at start:
/// `GuardStage` → `LocalStage` → `AuthenticationStage` → `ReadOnlyStage` →
/// `MediaTypeStage` → `ControlHop` (then `ControlGate` → `RouterStage` on the
/// control loop); every answer leaves through the request's `ResponseFinisher`.
extension RunLoopService {
    func handle(
        _ request: HTTPRequest, path: StageResponder<Exchange>, respond: @escaping @Sendable (HTTPResponse) -> Void
    ) {
        let exchange = exchange(for: request, respond: respond)
        if case .answer(let response, let route) = path.respond(exchange) {
            exchange.finisher.finish(response, route: route)
        }
    }

    /// The request with its one snapshot of the running state and its finisher.
    private func exchange(for request: HTTPRequest, respond: @escaping @Sendable (HTTPResponse) -> Void) -> Exchange {
        let path = request.path
        let isAPI = path == "/api" || path.hasPrefix("/api/")
        let state = snapshot()
        let origin = request.headers["origin"]
        let cors =
            isAPI && origin != nil && request.method != "OPTIONS"
            ? (state.requestGuard?.corsHeaders(origin: origin, host: request.headers["host"]) ?? []) : []
        return Exchange(
            request: request, state: state,
            finisher: ResponseFinisher(request, isAPI: isAPI, cors: cors, tools: finishing, respond: respond))
    }

    /// The caller's `X-Request-Id` when it is short and printable, else one
    /// made here: this boot's prefix and the request's number
    /// (`k7q2m9xa-17`), so ids differ across instances and restarts.
    static func requestId(for request: HTTPRequest) -> String {
        if let given = request.headers["x-request-id"], !given.isEmpty, given.utf8.count <= 128,
            given.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7f })
        {
            return given
        }
        return bootPrefix + String(request.id)
    }

    /// Eight random base-36 characters (about 41 bits) drawn once per process,
    /// then `-`: a shared prefix is expected only after some 1.5 million boots
    /// (the birthday bound), far beyond any fleet's history.
    static let bootPrefix: String = {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("0123456789abcdefghijklmnopqrstuvwxyz")
        return String((0..<8).map { _ in alphabet[Int(generator.next() % 36)] }) + "-"
    }()

    /// `?k=v&…` (sorted, percent-encoded) for a parsed query; "" when empty.
    static func queryString(_ query: [String: String]) -> String {
        guard !query.isEmpty else { return "" }
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        let pairs = query.keys.sorted().map { key in
            let value = query[key] ?? ""
            return
                "\(key.addingPercentEncoding(withAllowedCharacters: allowed) ?? key)=\(value.addingPercentEncoding(withAllowedCharacters: allowed) ?? value)"
        }
        return "?" + pairs.joined(separator: "&")
    }

    /// The paths answered outside the control loop, GET only, never behind the token.
    static var probePaths: [String] { LocalStage.probePaths }
}
