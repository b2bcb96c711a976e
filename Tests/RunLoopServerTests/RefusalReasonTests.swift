import Foundation
import Primitives
import Testing

@testable import RunLoopServer

/// `runloopd_limit_refusals_total`'s reasons known in advance (issue 41): a
/// typed list of `ErrorCode`s (`ServiceMetrics.refusalReasons`), held against
/// docs/metrics.md's row of the family, both ways, and each a 429 or a 503
/// of docs/api.md's Errors table. Both files are read from the checkout.
@Suite("Refusal reasons: ServiceMetrics, docs/metrics.md and docs/api.md agree")
struct RefusalReasonTests {
    static let reasons = Set(ServiceMetrics.refusalReasons.map(\.rawValue))

    /// The backticked codes after "from the start at 0:" in docs/metrics.md's
    /// `runloopd_limit_refusals_total` row.
    static func metricsRowCodes() -> Set<String> {
        let row = APIWordsTests.text("docs/metrics.md").split(separator: "\n").first {
            $0.hasPrefix("| `runloopd_limit_refusals_total` |")
        }
        guard let row, let start = row.range(of: "from the start at 0:") else { return [] }
        return Set(row[start.upperBound...].matches(of: /`([a-z][a-z_]*)`/).map { String($0.output.1) })
    }

    /// The codes of docs/api.md's Errors table, by the row's status.
    static func errorsTableCodes(status: String) -> Set<String> {
        ErrorCodeTests.errorsTableCodes(status: status)
    }

    @Test func refusalReasonsMatchMetricsDoc() {
        APIWordsTests.expectSame(
            Self.reasons, Self.metricsRowCodes(), "docs/metrics.md's runloopd_limit_refusals_total row")
    }

    @Test func refusalReasonsAre429sAnd503s() {
        let refusals = Self.errorsTableCodes(status: "429").union(Self.errorsTableCodes(status: "503"))
        #expect(!Self.errorsTableCodes(status: "429").isEmpty && !Self.errorsTableCodes(status: "503").isEmpty)
        for reason in Self.reasons.subtracting(refusals).sorted() {
            Issue.record("\(reason) is a refusal reason but not a 429 or 503 of docs/api.md's Errors table")
        }
        // Every 429 is a limit, counted from the start.
        for code in Self.errorsTableCodes(status: "429").subtracting(Self.reasons).sorted() {
            Issue.record("\(code) is a 429 of docs/api.md but not in ServiceMetrics.refusalReasons")
        }
        #expect(Self.reasons.count == ServiceMetrics.refusalReasons.count, "a reason listed twice")
    }

    @Test func everyReasonIsExposedFromTheStart() {
        let text = String(decoding: ServiceMetrics().exposition(ServiceMetrics.Sample()), as: UTF8.self)
        for reason in ServiceMetrics.refusalReasons {
            #expect(text.contains("runloopd_limit_refusals_total{reason=\"\(reason.rawValue)\"} 0"), "\(reason)")
        }
    }
}
