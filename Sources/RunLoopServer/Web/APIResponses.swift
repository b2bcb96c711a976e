import MicroHTTP
import Primitives
import RunLoopCore

/// Building HTTP responses from values and errors: statuses are decided here only.
enum APIResponses {
    static func json(_ status: Int, _ value: Value, headers: [(String, String)] = []) -> HTTPResponse {
        var body = JSON.serialize(value)
        body.append(0x0A)
        return json(status, body: body, headers: headers)
    }

    /// The same with a body already serialized (a JSON text and its newline).
    static func json(_ status: Int, body: [UInt8], headers: [(String, String)] = []) -> HTTPResponse {
        var all: [(String, String)] = [("Content-Type", "application/json"), ("Cache-Control", "no-store")]
        all.append(contentsOf: headers)
        return HTTPResponse(status: status, headers: all, body: body)
    }

    /// The status for an engine error kind.
    static func status(for kind: RunLoopError.Kind) -> Int {
        switch kind {
        case .badValue: return 400
        case .notFound: return 404
        case .conflict, .gone: return 409
        case .limit: return 429
        case .deadline: return 504
        case .failed: return 422
        }
    }

    static func error(_ error: RunLoopError) -> HTTPResponse {
        var headers: [(String, String)] = []
        if error.kind == .limit { headers.append(("Retry-After", "1")) }
        var response = json(status(for: error.kind), ["error": Rep.error(error)], headers: headers)
        response.errorCode = error.code
        return response
    }

    static func error(status: Int, code: ErrorCode, message: String, headers: [(String, String)] = []) -> HTTPResponse {
        var response = json(
            status, ["error": ["code": .string(code.rawValue), "message": .string(message), "field": .null]],
            headers: headers)
        response.errorCode = code.rawValue
        return response
    }

    /// The HTTP layer's own refusals (413, 503 while stopping, static 404/405)
    /// in the API's error shape: `{"error":{"code","message","field"}}`.
    @Sendable static func refusal(_ refusal: HTTPRefusal) -> HTTPResponse {
        var text = "{\"error\":{\"code\":"
        text += JSON.quoted(refusal.code.rawValue)
        text += ",\"message\":"
        text += JSON.quoted(refusal.message)
        text += ",\"field\":"
        text += refusal.field.map(JSON.quoted) ?? "null"
        text += "}}"
        var response = HTTPResponse(
            status: refusal.status, headers: [("Content-Type", "application/json")] + refusal.headers,
            body: Array(text.utf8))
        response.errorCode = refusal.code.rawValue
        return response
    }
}
