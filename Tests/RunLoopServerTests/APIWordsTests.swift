import Foundation
import Primitives
import RunLoopCore
import Testing

@testable import RunLoopServer

/// The API's words from one typed source (issue 41): each list of codes in
/// Swift is held against openapi.json's enums and the docs' tables, both
/// ways, so a code added in one place and forgotten in another fails here,
/// by name. openapi.json is read from the checkout, its generated enums
/// filled as the build fills them (`OpenAPIEnumsTests` holds the filling and
/// the served document): those tests fail when an enum's annotation is lost.
@Suite("API words: Swift, openapi.json and the docs agree")
struct APIWordsTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../..").standardized

    static func text(_ path: String) -> String {
        (try? String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)) ?? ""
    }

    static var document: Value { OpenAPIContractTests.document }

    /// The string enum at a path of openapi.json.
    static func openAPIEnum(_ keys: [String]) -> Set<String> {
        Set(document.member(keys)["enum"].items.compactMap(\.string))
    }

    /// The backticked codes in column `column` of the Markdown table in
    /// `path` whose header row begins with `header` (to the table's end).
    static func tableCodes(_ path: String, header: String, column: Int) -> Set<String> {
        var codes = Set<String>()
        var inTable = false
        for line in text(path).split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix(header) {
                inTable = true
                continue
            }
            guard inTable else { continue }
            guard line.hasPrefix("|") else { break }
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map {
                $0.trimmingCharacters(in: .whitespaces)
            }
            guard cells.count > column + 1, cells[column + 1].hasPrefix("`") else { continue }
            codes.insert(cells[column + 1].trimmingCharacters(in: CharacterSet(charactersIn: "`")))
        }
        return codes
    }

    /// Records each code in one list and not the other.
    static func expectSame(
        _ swift: Set<String>, _ other: Set<String>, _ place: String, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(!other.isEmpty, "no codes found in \(place)", sourceLocation: sourceLocation)
        for code in swift.subtracting(other).sorted() {
            Issue.record("\(code) is in the Swift list but not in \(place)", sourceLocation: sourceLocation)
        }
        for code in other.subtracting(swift).sorted() {
            Issue.record("\(code) is in \(place) but not in the Swift list", sourceLocation: sourceLocation)
        }
    }

    static let warningCodes = Set(WarningCode.allCases.map(\.rawValue))
    static let causeCodes = Set(ExitCauseCode.allCases.map(\.rawValue))

    @Test func warningCodesMatchOpenAPIWarningSchema() {
        Self.expectSame(
            Self.warningCodes, Self.openAPIEnum(["components", "schemas", "Warning", "properties", "code"]),
            "openapi.json's Warning.code enum")
    }

    @Test func warningCodesMatchOpenAPIWarningsFilter() {
        let parameter = Self.document["paths", "/api/warnings", "get", "parameters"].items.first {
            $0["name"] == "code"
        }
        Self.expectSame(
            Self.warningCodes, Set((parameter?["schema", "enum"].items ?? []).compactMap(\.string)),
            "openapi.json's GET /api/warnings ?code= enum")
    }

    @Test func warningCodesMatchExplainTable() {
        Self.expectSame(
            Self.warningCodes, Self.tableCodes("docs/explain.md", header: "| code | severity |", column: 0),
            "docs/explain.md's Warnings table")
    }

    @Test func causeCodesMatchOpenAPIExitCauseSchema() {
        Self.expectSame(
            Self.causeCodes, Self.openAPIEnum(["components", "schemas", "ExitCause", "properties", "code"]),
            "openapi.json's ExitCause.code enum")
    }

    @Test func causeCodesMatchExplainTable() {
        Self.expectSame(
            Self.causeCodes, Self.tableCodes("docs/explain.md", header: "| exitReason | code |", column: 1),
            "docs/explain.md's \"Why a run ended\" table")
    }

    @Test func causeCodesAreTheOnesTheEngineGives() throws {
        // Every ExitCause is made in ExitCause.swift with a literal code.
        let source = Self.text("Sources/RunLoopModel/ExitCause.swift")
        let given = Set(source.matches(of: /code: "([a-z_]+)"/).map { String($0.output.1) })
        Self.expectSame(Self.causeCodes, given, "Sources/RunLoopModel/ExitCause.swift")
    }
}
