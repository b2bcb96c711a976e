import Foundation
import Primitives
import RunLoopCore
import Testing

@testable import RunLoopServer

/// The API's error codes from one typed source (issue 41): `ErrorCode`
/// (Sources/Primitives/ErrorCode.swift) is the only way to make an error's
/// code, and this suite holds it against openapi.json's `ErrorBody.code` enum
/// and docs/api.md's Errors table, both ways, so a code added in one place and
/// forgotten in another fails here, by name. Both files are read from the checkout.
@Suite("Error codes: ErrorCode, openapi.json and docs/api.md agree")
struct ErrorCodeTests {
    static let codes = Set(ErrorCode.allCases.map(\.rawValue))

    /// Every backticked lower-case code in the "codes" column of docs/api.md's
    /// Errors table (header names such as `Retry-After` are not codes); with
    /// `status`, only that status's rows.
    static func errorsTableCodes(status: String? = nil) -> Set<String> {
        var codes = Set<String>()
        var inTable = false
        for line in APIWordsTests.text("docs/api.md").split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("| status | when | codes |") {
                inTable = true
                continue
            }
            guard inTable else { continue }
            guard line.hasPrefix("|") else { break }
            let cells = line.split(separator: "|", omittingEmptySubsequences: false)
            guard cells.count > 3, status.map({ cells[1].trimmingCharacters(in: .whitespaces) == $0 }) ?? true
            else { continue }
            for match in cells[3].matches(of: /`([a-z][a-z_]*)`/) { codes.insert(String(match.output.1)) }
        }
        return codes
    }

    @Test func errorCodesMatchOpenAPIErrorBody() {
        APIWordsTests.expectSame(
            Self.codes, APIWordsTests.openAPIEnum(["components", "schemas", "ErrorBody", "properties", "code"]),
            "openapi.json's ErrorBody.code enum")
    }

    @Test func errorCodesMatchAPIErrorsTable() {
        APIWordsTests.expectSame(Self.codes, Self.errorsTableCodes(), "docs/api.md's Errors table")
    }

    @Test func rawValuesAreTheWireText() {
        // snake_case, unique (an enum's raw values are, but a copy-paste typo is not caught by the compiler).
        for code in ErrorCode.allCases {
            #expect(code.rawValue.wholeMatch(of: /[a-z][a-z_]*/) != nil, "\(code)")
        }
        #expect(Self.codes.count == ErrorCode.allCases.count)
    }

    @Test func everyErrorAnswerCarriesItsCode() throws {
        let response = APIResponses.error(status: 503, code: .overloaded, message: "full")
        #expect(response.errorCode == "overloaded")
        let thrown = APIResponses.error(RunLoopError.limit(.queueFull, "full"))
        #expect(thrown.status == 429 && thrown.errorCode == "queue_full")
        let body = try JSON.parse(thrown.body)
        #expect(body["error", "code"] == "queue_full")
    }
}
