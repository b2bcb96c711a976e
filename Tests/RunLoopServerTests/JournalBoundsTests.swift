import Foundation
import RunLoopTestSupport
import Testing

@testable import RunLoopServer

/// The journal's two bounds (`--journal-size`, `--journal-bytes`): checked
/// against a model, a plain list of what was recorded, with a fresh seed each
/// run (`JOURNAL_SEED=s` replays one).
@Suite("Journal bounds")
struct JournalBoundsTests {
    @Test("a request larger than the whole budget is kept alone; an export counts what it missed")
    func largerThanTheBudget() {
        let journal = Journal(capacity: 10, maxBytes: 100)
        journal.record(method: "POST", path: "/a", body: Array(repeating: 1, count: 40), status: 200, answer: [])
        journal.record(method: "POST", path: "/b", body: Array(repeating: 1, count: 40), status: 200, answer: [])
        #expect(journal.usage == Journal.Usage(entries: 2, bytes: 80, dropped: 0))
        journal.record(
            method: "POST", path: "/c", body: Array(repeating: 1, count: 150), status: 200, answer: [1, 2])
        #expect(journal.usage == Journal.Usage(entries: 1, bytes: 152, dropped: 2))
        let page = journal.entries(since: 0, limit: 100)
        #expect(page.entries.map(\.path) == ["/c"] && page.missed == 2)
        #expect(journal.entries(since: 2, limit: 100).missed == 0)
        #expect(journal.entries(since: 3, limit: 100) == (entries: [], missed: 0))
        // The next one fits beside nothing larger: the large one makes room.
        journal.record(method: "DELETE", path: "/d", body: [], status: 200, answer: [1])
        #expect(journal.usage == Journal.Usage(entries: 1, bytes: 1, dropped: 3))
        #expect(journal.entries(since: 1, limit: 100).missed == 2)
    }

    @Test("random records: the journal holds the newest that fit both bounds (seed printed)")
    func randomized() {
        let seed = SplitMix.seed("JOURNAL_SEED", test: "JournalBoundsTests.randomized")
        var random = SplitMix(seed)
        for round in 0..<20 {
            let capacity = Int.random(in: 1...40, using: &random)
            let maxBytes = Int.random(in: 1...4000, using: &random)
            let journal = Journal(capacity: capacity, maxBytes: maxBytes, maxExportBytes: 1 << 30)
            var model: [(seq: Int, bytes: Int)] = []
            var dropped = 0
            for seq in 1...Int.random(in: 1...200, using: &random) {
                let body = Int.random(in: 0...(random.next() % 8 == 0 ? 5000 : 300), using: &random)
                let answer = Int.random(in: 0...300, using: &random)
                journal.record(
                    method: "POST", path: "/\(seq)", body: Array(repeating: 0x61, count: body), status: 200,
                    answer: Array(repeating: 0x62, count: answer))
                model.append((seq, body + answer))
                // The model: drop the oldest while either bound is passed, never the newest.
                while model.count > capacity || (model.count > 1 && model.map(\.bytes).reduce(0, +) > maxBytes) {
                    model.removeFirst()
                    dropped += 1
                }
                let usage = journal.usage
                let held = model.map(\.bytes).reduce(0, +)
                #expect(
                    usage == Journal.Usage(entries: model.count, bytes: held, dropped: dropped),
                    "seed \(seed), round \(round), seq \(seq)")
                #expect(held <= maxBytes || model.count == 1, "seed \(seed)")
            }
            let since = Int.random(in: 0...(model.last!.seq), using: &random)
            let page = journal.entries(since: since, limit: 10_000)
            #expect(page.entries.map(\.seq) == model.map(\.seq).filter { $0 > since }, "seed \(seed), round \(round)")
            #expect(page.missed == max(0, model[0].seq - 1 - since), "seed \(seed), round \(round)")
        }
    }
}

extension Journal.Page {
    static func == (page: Journal.Page, expected: (entries: [Journal.Entry], missed: Int)) -> Bool {
        page.entries.map(\.seq) == expected.entries.map(\.seq) && page.missed == expected.missed
    }
}
