import MicroHTTP

/// Where a request's answer goes. Every answer to an HTTP request, whichever
/// stage or thread gives it, goes through that request's `ResponseFinisher`;
/// a request the service makes of itself (`--setup`) has a caller waiting.
enum Answerer: Sendable {
    /// An HTTP request: the finisher adds the request id and security
    /// headers, counts it, keeps it in the journal and logs it.
    case finisher(ResponseFinisher)
    /// A caller inside the process.
    case caller(@Sendable (HTTPResponse) -> Void)

    /// Answers with `response`; `route` is its metrics label.
    func callAsFunction(_ response: HTTPResponse, route: String) {
        switch self {
        case .finisher(let finisher): finisher.finish(response, route: route)
        case .caller(let respond): respond(response)
        }
    }
}
