import Foundation
import Testing

@testable import runloopd

/// docs/setup.md's flag table against `runloopd serve --help`, the other way
/// (`ServeOptionsTests.documented` checks that every option has its row):
/// a row whose flag or variable no option has fails (issue 41).
@Suite struct FlagTableTests {
    @Test func everyFlagRowInSetupIsAnOption() throws {
        let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../docs/setup.md")
        let text = try String(contentsOf: docs, encoding: .utf8)
        let options = Set(documentedSettings().map { "\($0.flag) \($0.variable)" })
        let rows = text.matches(of: #/\n\| `(--[a-z0-9-]+)` \| `(RUNLOOPD_[A-Z0-9_]+)` \|/#).map {
            "\($0.output.1) \($0.output.2)"
        }
        #expect(rows.count > 20, "no flag table found in docs/setup.md")
        for row in rows where !options.contains(row) {
            Issue.record("docs/setup.md lists \(row), which no option of runloopd serve has")
        }
    }
}
