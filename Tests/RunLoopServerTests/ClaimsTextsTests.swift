import Foundation
import RunLoopCore
import Testing

@testable import RunLoopServer

/// docs/claims.md says what it finds, and only that (issue 38's learner):
/// an Untestable claim states no verdict, the summary table counts the
/// verdicts as they are, a claim about a bare wake-up cites a step that
/// sends one, and the claims the learner checked carry the verdict CF shows.
@Suite("claims catalogue: the texts")
struct ClaimsTextsTests {
    typealias Claim = ClaimsCatalogueTests.Claim

    static func claim(_ number: Int) throws -> Claim {
        try #require(try ClaimsCatalogueTests.claims().first { $0.number == number }, "claim \(number)")
    }

    @Test("an Untestable claim gives the reason no request can observe it, never a verdict")
    func untestableStatesNoVerdict() throws {
        let verdictWords = try Regex(#"(?i)\b(false|true|wrong|correct|holds)\b"#)
        for claim in try ClaimsCatalogueTests.claims() where claim.verdictKind == "Untestable on Linux" {
            let text = claim.verdict.replacingOccurrences(of: "**Untestable on Linux.**", with: "")
            #expect(text.firstMatch(of: verdictWords) == nil, "claim \(claim.number) is Untestable but says: \(text)")
        }
    }

    @Test("the summary table counts the verdicts the catalogue gives")
    func tableCountsTheVerdicts() throws {
        let claims = try ClaimsCatalogueTests.claims()
        let count = { (kind: String) in claims.filter { $0.verdictKind == kind }.count }
        let expected =
            "| **all** | **\(claims.count)** | **\(count("Shown"))** | **\(count("False"))** | "
            + "**\(count("Partly true"))** | **\(count("Darwin-only"))** | **\(count("Untestable on Linux"))** |"
        let url = E2EPaths.packageRoot.appendingPathComponent("docs/claims.md")
        let text = try String(contentsOf: url, encoding: .utf8)
        #expect(text.contains(expected), "the table's all row should read \(expected)")
    }

    @Test("claim 55's explicit wake-up cites a step that sends a bare CFRunLoopWakeUp")
    func bareWakeUpIsCited() throws {
        let claim = try Self.claim(55)
        let dir = E2EPaths.packageRoot.appendingPathComponent("experiments").path
        let experiments = Dictionary(uniqueKeysWithValues: try ExperimentFiles.load(dir).map { ($1.id, $1) })
        let cited = try Regex(#"`([a-z0-9-]+)` \(steps? (\d+)(?:-(\d+))?"#)
        var wakeUps: [String] = []
        for match in claim.verdict.matches(of: cited) {
            let id = String(match.output[1].substring ?? "")
            guard let experiment = experiments[id], let first = Int(match.output[2].substring ?? "") else { continue }
            let last = match.output[3].substring.flatMap { Int($0) } ?? first
            for n in first...last where n <= experiment.steps.count {
                let step = experiment.steps[n - 1]
                if step.method == "POST" && step.path.hasSuffix("/wakeup") { wakeUps.append("\(id) step \(n)") }
            }
        }
        #expect(!wakeUps.isEmpty, "claim 55 cites no step that sends a wake-up: \(claim.verdict)")
    }

    @Test("the claims the learner checked read as CF shows them")
    func learnersClaims() throws {
        let expected: [Int: (kind: String, experiment: String)] = [
            25: ("False", "testdemo1-empty-mode"),
            35: ("Partly true", "one-source0-per-handled-pass"),
            87: ("False", "kernel-thread-delivers-message"),
            88: ("False", "adding-a-source0-does-not-wake"),
            89: ("Shown", "timer-due-during-a-handler"),
            90: ("Shown", "wakeup-with-nothing-to-do"),
        ]
        for (number, want) in expected.sorted(by: { $0.key < $1.key }) {
            let claim = try Self.claim(number)
            #expect(claim.verdictKind == want.kind, "claim \(number): \(claim.verdict)")
            #expect(claim.verdict.contains("`\(want.experiment)`"), "claim \(number): \(claim.verdict)")
        }
    }
}
