extension HTTPResponse {
    /// A JSON error response in the API's shape:
    /// `{"error":{"code":"…","message":"…","field":null}}` with `Content-Type: application/json`.
    ///
    /// - Parameters:
    ///   - status: The HTTP status (400, 404, 413, 503, …).
    ///   - code: The machine-readable code (`not_found`, `payload_too_large`, …).
    ///   - message: A sentence for people.
    ///   - field: The offending input field, when there is one.
    ///   - headers: Extra header fields (`Allow`, `Retry-After`, …).
    public static func jsonError(
        status: Int, code: String, message: String, field: String? = nil, headers: [(String, String)] = []
    ) -> HTTPResponse {
        var text = "{\"error\":{\"code\":"
        text += jsonStringLiteral(code)
        text += ",\"message\":"
        text += jsonStringLiteral(message)
        text += ",\"field\":"
        text += field.map(jsonStringLiteral) ?? "null"
        text += "}}"
        var response = HTTPResponse(
            status: status,
            headers: [("Content-Type", "application/json")] + headers,
            body: Array(text.utf8)
        )
        response.errorCode = code
        return response
    }

    /// `s` as a JSON string literal, quotes included.
    static func jsonStringLiteral(_ s: String) -> String { JSON.quoted(s) }
}
