import RunLoopCore
import Testing

@testable import RunLoopServer

/// The perform route's `via` field (issue 38), read as the route reads it:
/// absent or null is the selector path; selector and block are taken; any
/// other value is a 400 naming `via` and the values it may take.
@Suite struct PerformViaRouteTests {
    static func via(_ json: String) throws(RunLoopError) -> PerformVia {
        try API.performVia(try Body(Array(json.utf8), allowed: API.performFields))
    }

    @Test func absentOrNullIsTheSelectorPath() throws {
        #expect(try Self.via(#"{"selector":"count"}"#) == .selector)
        #expect(try Self.via(#"{"selector":"count","via":null}"#) == .selector)
    }

    @Test func bothKindsAreTaken() throws {
        #expect(try Self.via(#"{"via":"selector"}"#) == .selector)
        #expect(try Self.via(#"{"via":"block"}"#) == .block)
    }

    @Test func anythingElseIsABadValueNamingTheField() {
        for json in [#"{"via":"Block"}"#, #"{"via":"blocks"}"#, #"{"via":""}"#, #"{"via":1}"#, #"{"via":["block"]}"#] {
            do {
                _ = try Self.via(json)
                Issue.record("\(json) was taken")
            } catch {
                #expect(error.code == "bad_value" && error.field == "via", "\(json): \(error)")
                if json.contains("\"") && !json.contains("[") && !json.contains(":1") {
                    #expect(error.message.contains(#""selector", "block""#), "\(error.message)")
                }
            }
        }
    }
}
