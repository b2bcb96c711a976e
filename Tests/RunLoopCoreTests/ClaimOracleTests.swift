import Foundation
import Testing

extension ClaimCase: CustomTestStringConvertible {
    var testDescription: String { name }
}

/// Issue 38: every testable claim of docs/claims.md names the plain-CF
/// cases that confirm it (`**Plain CF:**`), and each case, played on plain
/// CF with no runloopd code, shows what it says. The cases are played one at
/// a time, apart from the rest of the suite (the Makefile's PREDICT_TESTS):
/// each is on a grid of 25 ms slots, and a play off it is played again.
@Suite(.serialized) struct ClaimOracleTests {
    static let claimsFile = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../docs/claims.md").standardized

    @Test(arguments: ClaimCase.all)
    func confirmedOnPlainCF(_ claimCase: ClaimCase) {
        let problems = claimCase.plays()
        #expect(problems.isEmpty, "\(claimCase.name) (\(claimCase.shows)): \(problems.joined(separator: "; "))")
    }

    /// Each claim's `**Plain CF:**` line: the case names in it, or nil when
    /// it says the claim is not about CF (and why).
    static func plainCFLines() throws -> [(claim: Int, kind: String, line: String?)] {
        let lines = try String(contentsOf: claimsFile, encoding: .utf8).split(
            separator: "\n", omittingEmptySubsequences: false
        ).map(String.init)
        let heading = try Regex(#"^\*\*(\d+)\.\*\* 「"#)
        var out: [(claim: Int, kind: String, line: String?)] = []
        for (index, line) in lines.enumerated() {
            guard let match = try heading.firstMatch(in: line), let number = Int(match.output[1].substring ?? "")
            else { continue }
            let verdict = index + 2 < lines.count ? lines[index + 2] : ""
            let kind = ["Shown", "False", "Partly true", "Darwin-only", "Untestable on Linux"].first {
                verdict.hasPrefix("**\($0).**")
            }
            let plain = index + 3 < lines.count && lines[index + 3].hasPrefix("**Plain CF:**") ? lines[index + 3] : nil
            out.append((number, kind ?? "", plain))
        }
        return out
    }

    @Test func everyTestableClaimNamesThePlainCFCasesThatConfirmIt() throws {
        let names = Set(ClaimCase.all.map(\.name))
        #expect(names.count == ClaimCase.all.count, "two cases share a name")
        let cited = try Regex(#"`([a-z0-9-]+)`"#)
        var named: Set<String> = []
        let claims = try Self.plainCFLines()
        #expect(claims.count >= 80)
        for (claim, kind, line) in claims {
            guard ["Shown", "False", "Partly true"].contains(kind) else {
                #expect(line == nil, "claim \(claim) (\(kind)) is not testable but names plain-CF cases")
                continue
            }
            guard let line else {
                Issue.record("claim \(claim) (\(kind)) has no **Plain CF:** line after its verdict")
                continue
            }
            let cases = line.matches(of: cited).map { String($0.output[1].substring ?? "") }
            if cases.isEmpty {
                // Not a claim about CF: it says so, and why.
                #expect(
                    line.hasPrefix("**Plain CF:** not a CF behaviour: ") && line.count > 60,
                    "claim \(claim) names no plain-CF case and gives no reason: \(line)")
            }
            for name in cases {
                #expect(names.contains(name), "claim \(claim) names \(name), which is not a plain-CF case")
                named.insert(name)
            }
        }
        #expect(names.subtracting(named).isEmpty, "cases no claim names: \(names.subtracting(named).sorted())")
    }
}
