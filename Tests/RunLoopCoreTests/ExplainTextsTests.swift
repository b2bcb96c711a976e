import Foundation
import Testing

@testable import RunLoopCore

/// Sentences runloopd writes about a loop, made from the facts it holds and
/// checked against what CF does (issue 38's learner's list).
@Suite("explain texts")
struct ExplainTextsTests {
    @Test("a returnAfterSourceHandled pass: CF handles one custom source, a mode's performs go together")
    func handledPassMessage() {
        let performs = (1...3).map { CalloutRef(kind: .perform, id: "p\($0)", selector: "echo") }
        let cause = ExitCause.sourceHandled(performs.last, pass: performs)
        #expect(!cause.message.contains("every signalled custom source"), "\(cause.message)")
        #expect(cause.message.contains("one signalled custom source per pass"), "\(cause.message)")
        #expect(cause.message.contains("3 performs were queued in their mode's one perform source"), "\(cause.message)")
        #expect(!cause.message.contains("port message"), "no port in this pass: \(cause.message)")

        let mixed = [CalloutRef(kind: .source, id: "s1"), CalloutRef(kind: .port, id: "s2")]
        let both = ExitCause.sourceHandled(mixed.last, pass: mixed)
        #expect(both.message.contains("a port message is read after the custom source, in the same pass"))
        #expect(!both.message.contains("performs were queued"), "\(both.message)")
    }
}
