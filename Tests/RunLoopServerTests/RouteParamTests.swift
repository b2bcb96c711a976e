import MicroHTTP
import RunLoopCore
import Testing

@testable import RunLoopServer

/// `ctx.param` (issue 41): a capture the route's template has is its value;
/// one it does not have throws, never answers as an empty id.
@Suite struct RouteParamTests {
    static func context(_ params: [String: String]) -> RouteContext {
        RouteContext(
            request: HTTPRequest(method: "GET", path: "/api/threads/t1"), params: params, answer: .caller { _ in },
            route: "/api/threads/{id}")
    }

    @Test func aCaptureIsItsValue() throws {
        #expect(try Self.context(["id": "t1"]).param("id") == "t1")
    }

    @Test func aMissingCaptureThrows() {
        #expect(throws: RunLoopError.self) { try Self.context(["id": "t1"]).param("tid") }
        do {
            _ = try Self.context([:]).param("id")
            Issue.record("a missing capture answered")
        } catch {
            #expect(error.code == "no_capture" && error.field == "id", "\(error)")
        }
    }
}
