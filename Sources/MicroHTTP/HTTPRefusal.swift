import Primitives

/// An answer the HTTP layer gives by itself, without the handler: a body over
/// the limit (413), a request cut short by a stop (503), a static file asked
/// with the wrong method (405) or missing (404).
///
/// The layer knows no body format: the handler renders refusals
/// (`HTTPRequestHandler.response(for:)`, `StaticFiles`' `refusals`), so an
/// API can answer them in its own error shape. Plain data.
public struct HTTPRefusal: Sendable {
    /// The HTTP status.
    public var status: Int
    /// A machine-readable code (`payload_too_large`, `shutting_down`, …).
    public var code: ErrorCode
    /// A sentence for people.
    public var message: String
    /// The offending input field, when there is one.
    public var field: String?
    /// Header fields the refusal needs (`Allow`, `Connection: close`, …).
    public var headers: [(String, String)]

    /// Creates a refusal.
    public init(
        status: Int, code: ErrorCode, message: String, field: String? = nil, headers: [(String, String)] = []
    ) {
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.headers = headers
    }

    /// The rendering when nobody gives another: `code: message` as plain text.
    public static let plainText: @Sendable (HTTPRefusal) -> HTTPResponse = { refusal in
        var response = HTTPResponse(
            status: refusal.status,
            headers: [("Content-Type", "text/plain; charset=utf-8")] + refusal.headers,
            body: Array("\(refusal.code.rawValue): \(refusal.message)\n".utf8))
        response.errorCode = refusal.code.rawValue
        return response
    }
}
