import Foundation
import Primitives
import RunLoopCore
import Testing

@testable import RunLoopServer

/// openapi.json's generated enums (issue 41): the checked-in file names a
/// Swift list with `"x-runloopd-enum": "WarningCode"` where an enum belongs,
/// and the build writes the list there (`OpenAPIEnums.fill`, run by the
/// EmbedFiles plugin). These hold that every server serves the lists whole,
/// that each list has its place, and that the checked-in file keeps no
/// hand-written copy that could drift.
@Suite("openapi.json's enums made from the Swift words")
struct OpenAPIEnumsTests {
    /// Where each list is served, by annotation name.
    static let places: [(name: String, path: [String])] = [
        ("ErrorCode", ["components", "schemas", "ErrorBody", "properties", "code"]),
        ("WarningCode", ["components", "schemas", "Warning", "properties", "code"]),
        ("ExitCauseCode", ["components", "schemas", "ExitCause", "properties", "code"]),
    ]

    static func warningsFilter(_ document: Value) -> Value {
        document["paths", "/api/warnings", "get", "parameters"].items.first { $0["name"] == "code" }?["schema"] ?? .null
    }

    @Test("a server serves every generated enum whole, in the Swift order")
    func servedEnumsAreTheSwiftLists() throws {
        let served = OpenAPIDocument.document(limits: ServiceConfiguration())
        for document in [served, OpenAPIDocument.embedded] {
            for (name, path) in Self.places {
                let values = document.member(path)["enum"].items.compactMap(\.string)
                #expect(values == OpenAPIEnums.lists[name], "\(path.joined(separator: ".")): \(values)")
            }
            let filter = Self.warningsFilter(document)["enum"].items.compactMap(\.string)
            #expect(filter == WarningCode.allCases.map(\.rawValue), "GET /api/warnings ?code=: \(filter)")
        }
        #expect(OpenAPIEnums.lists["ErrorCode"] == ErrorCode.allCases.map(\.rawValue))
        #expect(OpenAPIEnums.lists["WarningCode"] == WarningCode.allCases.map(\.rawValue))
        #expect(OpenAPIEnums.lists["ExitCauseCode"] == ExitCauseCode.allCases.map(\.rawValue))
    }

    @Test("the checked-in file marks each place and writes no enum there by hand")
    func checkoutMarksEachPlace() throws {
        let raw = try JSON.parse(Array(OpenAPIContractTests.sourceText.utf8))
        for (name, path) in Self.places {
            #expect(raw.member(path)[OpenAPIEnums.key] == .string(name), "\(path.joined(separator: "."))")
            #expect(raw.member(path)["enum"] == .null, "\(path.joined(separator: ".")) has a hand-written enum")
        }
        #expect(Self.warningsFilter(raw)[OpenAPIEnums.key] == "WarningCode")
        #expect(Self.warningsFilter(raw)["enum"] == .null, "GET /api/warnings ?code= has a hand-written enum")
        // Every list has at least one place (a list no schema names is a list nobody serves).
        for name in OpenAPIEnums.lists.keys {
            #expect(OpenAPIContractTests.sourceText.contains("\"\(OpenAPIEnums.key)\": \"\(name)\""), "\(name)")
        }
    }

    @Test("filling writes the enum after the annotation and keeps every other line")
    func fillWritesAfterTheAnnotation() throws {
        let text = """
            {
              "a": {
                "x-runloopd-enum": "ExitCauseCode",
                "type": "string"
              },
              "b": {
                "type": "string",
                "x-runloopd-enum": "ExitCauseCode"
              }
            }
            """
        let filled = try OpenAPIEnums.fill(text)
        let document = try JSON.parse(Array(filled.utf8))
        let causes = ExitCauseCode.allCases.map(\.rawValue)
        #expect(document["a", "enum"].items.compactMap(\.string) == causes)
        #expect(document["b", "enum"].items.compactMap(\.string) == causes)
        #expect(document["a", "type"] == "string" && document["b", "type"] == "string")
        #expect(filled.split(separator: "\n").count == text.split(separator: "\n").count + 2 * (causes.count + 2))
        // A file without annotations is left as it is.
        #expect(try OpenAPIEnums.fill("{\n  \"a\": 1\n}\n") == "{\n  \"a\": 1\n}\n")
    }

    @Test("an unknown list or an annotation not alone on its line stops the build")
    func fillRefusesWhatItCannotPlace() {
        #expect(throws: OpenAPIEnums.Failure.self) {
            try OpenAPIEnums.fill("{\n  \"x-runloopd-enum\": \"NoSuchCode\"\n}")
        }
        #expect(throws: OpenAPIEnums.Failure.self) {
            try OpenAPIEnums.fill("{ \"type\": \"string\", \"x-runloopd-enum\": \"ErrorCode\" }")
        }
    }

    @Test("a key written twice in one object stops the build, wherever it is")
    func fillRefusesDuplicateKeys() throws {
        // TimerRequest once had two "anyOf"s; every reader kept the last,
        // so the schema the fuzzer used was not the one last written.
        let twice = "{\n  \"a\": {\n    \"anyOf\": [1],\n    \"b\": \"x:y\",\n    \"anyOf\": [2]\n  }\n}"
        let found = OpenAPIEnums.duplicateKeys(in: twice)
        #expect(found.map(\.key) == ["anyOf"] && found.map(\.line) == [5])
        #expect(throws: OpenAPIEnums.Failure.self) { try OpenAPIEnums.fill(twice) }
        // The same key in sibling objects, in an array's objects, or as a
        // string value is not a duplicate; an escaped quote does not end a key.
        let fine = #"{"a": {"k": 1}, "b": {"k": [{"k": "k"}, {"k": "\"k"}]}, "k": "a", "\"k": 2}"#
        #expect(OpenAPIEnums.duplicateKeys(in: fine).isEmpty)
        #expect(OpenAPIEnums.duplicateKeys(in: OpenAPIContractTests.sourceText).isEmpty)
    }
}
