import Foundation
import RunLoopCore
import Testing

@testable import RunLoopServer

/// docs/claims.md: the articles' claims, each with a verdict that names the
/// experiments (and steps) showing it. The experiments themselves are played
/// by `make test`; these tests keep the catalogue pointing at what exists.
@Suite("claims catalogue")
struct ClaimsCatalogueTests {
    struct Claim {
        var number: Int
        var heading: String
        var verdictKind: String
        var verdict: String
    }

    static let verdictKinds = ["Shown", "False", "Partly true", "Darwin-only", "Untestable on Linux"]

    /// The claims of docs/claims.md: a `**N.** 「quote」 (section)` line, a gist
    /// line, then a `**Kind.** text` verdict line.
    static func claims() throws -> [Claim] {
        let url = E2EPaths.packageRoot.appendingPathComponent("docs/claims.md")
        let lines = try String(contentsOf: url, encoding: .utf8).split(
            separator: "\n", omittingEmptySubsequences: false)
        let heading = try Regex(#"^\*\*(\d+)\.\*\* 「[^」]+」"#)
        var claims: [Claim] = []
        for (index, line) in lines.enumerated() {
            guard let match = try heading.firstMatch(in: String(line)),
                let number = Int(match.output[1].substring ?? "")
            else { continue }
            let verdictLine = index + 2 < lines.count ? String(lines[index + 2]) : ""
            let kind = verdictKinds.first { verdictLine.hasPrefix("**\($0).**") }
            claims.append(
                Claim(number: number, heading: String(line), verdictKind: kind ?? "", verdict: verdictLine))
        }
        return claims
    }

    @Test("docs/claims.md holds at least 40 numbered claims, each with a verdict")
    func everyClaimHasAVerdict() throws {
        let claims = try Self.claims()
        #expect(claims.count >= 40)
        #expect(claims.map(\.number) == Array(1...max(claims.count, 1)), "numbered 1, 2, 3, … without gaps")
        for claim in claims {
            #expect(!claim.verdictKind.isEmpty, "claim \(claim.number) has no verdict line: \(claim.verdict)")
        }
    }

    @Test("every experiment a verdict names exists, and every step it cites is one of that experiment's")
    func citedExperimentsExist() throws {
        let dir = E2EPaths.packageRoot.appendingPathComponent("experiments").path
        var steps: [String: Int] = [:]
        for (_, experiment) in try ExperimentFiles.load(dir) { steps[experiment.id] = experiment.steps.count }
        let reference = try Regex(#"`([a-z0-9-]+)`"#)
        let stepList = try Regex(#"steps? (\d+(?:-\d+)?(?:(?:, | and )\d+(?:-\d+)?)*)"#)
        let number = try Regex(#"\d+"#)
        for claim in try Self.claims() {
            let references = claim.verdict.matches(of: reference)
            if ["Shown", "False", "Partly true"].contains(claim.verdictKind) {
                #expect(!references.isEmpty, "claim \(claim.number) (\(claim.verdictKind)) names no experiment")
            }
            for (k, ref) in references.enumerated() {
                let id = String(ref.output[1].substring ?? "")
                guard let count = steps[id] else {
                    Issue.record("claim \(claim.number) cites \(id), which is not in experiments/")
                    continue
                }
                // The steps cited after this experiment, up to the next one named.
                let end = k + 1 < references.count ? references[k + 1].range.lowerBound : claim.verdict.endIndex
                let tail = claim.verdict[ref.range.upperBound..<end]
                for list in tail.matches(of: stepList) {
                    for n in list.output[1].substring?.matches(of: number) ?? [] {
                        let cited = Int(claim.verdict[n.range]) ?? 0
                        #expect(
                            (1...count).contains(cited),
                            "claim \(claim.number) cites step \(cited) of \(id), which has \(count) steps")
                    }
                }
            }
        }
    }
}
