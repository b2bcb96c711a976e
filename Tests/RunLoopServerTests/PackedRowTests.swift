import Foundation
import GRDB
@testable import RunLoopStore
import RunLoopTestSupport
import Testing

/// SQLite's packed rows (docs/history.md, "Packed rows"): a run of one
/// thread's performs, each kept with its request, goes in one row. Every
/// query must still give each event as if each pair had a row of its own:
/// checked against a model of what was written, with a fresh seed each run.
@Suite("SQLite packed rows")
struct PackedRowTests {
    @Test("the packed text reads back every pair, byte for byte")
    func packText() {
        let pairs = [
            Pack.Pair(
                seq: 7, at: 1_764_150_000.123, requestAt: 1_764_150_000.1234, data: #"{"a":"é,;1"}"#, request: ""),
            Pack.Pair(seq: 9, at: 0.1 + 0.2, requestAt: 1e-7, data: "", request: "{\"answer\":\n}"),
        ]
        let text = Pack.text(pairs)
        #expect(text.map(Pack.pairs) == pairs)
        #expect(Pack.text([Pack.Pair]()) == nil)
        // A cut text gives the pairs before the cut.
        #expect(text.map { Pack.pairs(String($0.dropLast(3))) } == [pairs[0]])
        #expect(Pack.pairs("x,1;") == [])
        // A number past 64 bits (a file edited by hand) ends the list, it does not trap.
        #expect(Pack.pairs("18446744073709551619,0,0,0,0;") == [])
        // Exact times, whatever the Double.
        let odd = [Double.ulpOfOne, -0.0, .greatestFiniteMagnitude, 1_795_728_682.326_912_3].map {
            Pack.Pair(seq: Int64.max, at: $0, requestAt: $0.nextUp, data: "{}", request: "")
        }
        #expect(Pack.text(odd).map(Pack.pairs) == odd)
    }

    @Test("a run packs one thread's pairs within the window, at most packMost, ids one per pair")
    func packingRules() {
        func pair(_ seq: Int64, _ at: Double, thread: String = "t1") -> StoredEvent {
            StoredEvent(
                instance: "i1", boot: 1, seq: seq, at: at, type: "perform", thread: thread, data: "{}",
                request: "{}", requestAt: at)
        }
        let plain = StoredEvent(instance: "i1", boot: 1, seq: 20, at: 10.05, type: "run-exit", thread: "t1", data: "{}")
        let events = [
            pair(1, 10), pair(3, 10.01), pair(5, 10.02, thread: "t2"), pair(7, 10.03, thread: "t2"), plain,
            pair(21, 10.06), pair(23, 10.2), pair(25, 10.21),
        ]
        let rows = SQLiteStore.rows(events[...], after: 100)
        #expect(rows.map(\.last) == [1, 3, 4, 5, 7])
        #expect(rows.map(\.id) == [102, 104, 105, 106, 108])
        #expect(rows.map(\.firstId) == [101, 103, nil, nil, 107])
        #expect(rows[0].firstAt == 10 && rows[0].earlier == 0..<1)
        let long = (0..<40).map { pair(Int64(2 * $0), 10 + Double($0) * 0.001) }
        #expect(SQLiteStore.rows(long[...], after: 0).map(\.id) == [32, 40])
    }

    @Test("a packed row found by a widened bound but with no pair inside the window does not end the page early")
    func emptyPackedRowsDoNotCount() throws {
        try SQLiteSegmentTests.withStore(sizeLimit: nil) { store, _ in
            func event(_ seq: Int64, _ at: Double, _ thread: String, pair: Bool) -> StoredEvent {
                StoredEvent(
                    instance: "i1", boot: 1, seq: seq, at: at, type: pair ? "perform" : "run-exit", thread: thread,
                    data: "{}", request: pair ? "{}" : nil, requestAt: pair ? at : nil)
            }
            // Another thread's events in the window come first; then t1's two pairs, packed, around it.
            try store.write(
                StoreBatch(events: [
                    event(1, 10.02, "t2", pair: false), event(2, 10.03, "t2", pair: false),
                    event(3, 10.00, "t1", pair: true), event(5, 10.05, "t1", pair: true),
                ]))
            let read = try store.events(HistoryQuery(since: 10.01, until: 10.04, limit: 2))
            // Two rows asked: the packed row (nothing inside) does not count, so both of t2's come.
            #expect(read.map(\.seq) == [2, 1])
        }
    }

    @Test("random runs of pairs: every query and every walk of pages gives the model's events (seed printed)")
    func randomized() throws {
        // Seeds that ever failed are kept here, then a fresh one.
        for seed in [UInt64.random(in: 1...UInt64.max)] {
            print("PackedRowTests.randomized seed \(seed)")
            try Self.randomized(seed: seed)
        }
    }

    /// What the model knows of one written event.
    struct Expected: Equatable {
        var seq: Int64
        var at: Double
        var type: String
        var thread: String?
        var data: String
        /// The seq of the perform this event's pair is found by (its own when alone).
        var by: Int64
        var byAt: Double
    }

    static func randomized(seed: UInt64) throws {
        var random = SplitMix(seed)
        try SQLiteSegmentTests.withStore(sizeLimit: nil) { store, path in
            var expected: [Expected] = []
            var seq: Int64 = 0
            var clock = 1_764_150_000.0
            var thread: String? = "t1"
            for _ in 0..<Int.random(in: 3...8, using: &random) {
                var batch: [StoredEvent] = []
                for _ in 0..<Int.random(in: 1...150, using: &random) {
                    // Mostly close together (packed), sometimes apart.
                    clock +=
                        Int.random(in: 0..<8, using: &random) == 0 ? 0.2 : Double.random(in: 0...0.02, using: &random)
                    seq += Int64.random(in: 1...3, using: &random)  // live-only events take seqs between
                    // Runs of one thread's events, as a busy loop makes them.
                    if Int.random(in: 0..<6, using: &random) == 0 {
                        thread = ["t1", "t2", "t3", nil].randomElement(using: &random)!
                    }
                    let data = #"{"at":"x","n":\#(seq)}"#
                    if thread != nil, Int.random(in: 0..<4, using: &random) != 0 {
                        let requestAt = clock + Double.random(in: 0...0.05, using: &random)
                        let request = #"{"at":"y","path":"/api/threads/\#(thread!)/perform","n":\#(seq)}"#
                        batch.append(
                            StoredEvent(
                                instance: "i1", boot: 1, seq: seq, at: clock, type: "perform", thread: thread,
                                data: data,
                                request: request, requestAt: requestAt))
                        expected.append(
                            Expected(
                                seq: seq, at: clock, type: "perform", thread: thread, data: data, by: seq, byAt: clock))
                        expected.append(
                            Expected(
                                seq: seq + 1, at: requestAt, type: "request", thread: thread, data: request, by: seq,
                                byAt: clock))
                        seq += 1
                    } else {
                        batch.append(
                            StoredEvent(
                                instance: "i1", boot: 1, seq: seq, at: clock, type: "run-exit", thread: thread,
                                data: data))
                        expected.append(
                            Expected(
                                seq: seq, at: clock, type: "run-exit", thread: thread, data: data, by: seq, byAt: clock)
                        )
                    }
                }
                try store.write(StoreBatch(events: batch))
            }
            let all = try store.events(HistoryQuery(limit: 1_000_000, ascending: true))
            func model(_ e: StoredEvent) -> Expected? {
                expected.first { $0.seq == e.seq }
            }
            #expect(all.count == expected.count, "seed \(seed)")
            #expect(all.map(\.seq) == expected.map(\.seq), "seed \(seed)")
            #expect(
                zip(all, expected).allSatisfy {
                    $0.data == $1.data && $0.at == $1.at && $0.type == $1.type && $0.thread == $1.thread
                }, "seed \(seed)")
            // Ids: increasing, shared by a perform and its request only.
            for (a, b) in zip(all, all.dropFirst()) {
                let sameId = a.id == b.id
                #expect(sameId == (b.type == "request" && a.type == "perform" && model(b)?.by == a.seq), "seed \(seed)")
                #expect(a.id <= b.id, "seed \(seed)")
            }
            let db = try DatabaseQueue.patient(path)
            let packed =
                try db.read { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM events WHERE more IS NOT NULL") } ?? 0
            let rows = try db.read { try Int.fetchOne($0, sql: "SELECT COUNT(*) FROM events") } ?? 0
            try db.close()

            // Random queries, each walked page by page as /api/history does.
            let first = expected.first?.byAt ?? clock
            for round in 0..<200 {
                var q = HistoryQuery(limit: Int.random(in: 1...9, using: &random))
                q.ascending = Bool.random(using: &random)
                if Bool.random(using: &random) { q.thread = ["t1", "t2", "t3"].randomElement(using: &random) }
                if Int.random(in: 0..<3, using: &random) == 0 {
                    q.types = [["perform"], ["request"], ["perform", "request"], ["run-exit", "request"]]
                        .randomElement(using: &random)!
                }
                if Bool.random(using: &random) { q.since = Double.random(in: first...clock, using: &random) }
                if Bool.random(using: &random) { q.until = Double.random(in: first...clock + 0.1, using: &random) }
                if Int.random(in: 0..<3, using: &random) == 0 {
                    // A window narrower than a packed row: some rows found hold no pair within it.
                    let since = Double.random(in: first...clock, using: &random)
                    (q.since, q.until) = (since, since + Double.random(in: 0...0.03, using: &random))
                }
                let wanted = expected.filter { e in
                    (q.thread == nil || e.thread == q.thread) && (q.types.isEmpty || q.types.contains(e.type))
                        && (q.since.map { e.byAt >= $0 } ?? true) && (q.until.map { e.byAt < $0 } ?? true)
                }
                let model = q.ascending ? wanted.map(\.seq) : wanted.reversed().map(\.seq)
                var walked: [Int64] = []
                var pages = 0
                while pages < 2_000 {
                    // As /api/history: one row more than the page, then whole ids up to the limit (`API.page`).
                    var ask = q
                    ask.limit = q.limit + 1
                    let read = try store.events(ask)
                    var end = 0
                    while end < read.count, end < q.limit {
                        var next = end + 1
                        while next < read.count, read[next].id == read[end].id { next += 1 }
                        end = next
                    }
                    walked += read[..<end].map(\.seq)
                    pages += 1
                    guard end < read.count, let last = read[..<end].last else { break }
                    q.cursor = last.id
                }
                #expect(walked == model, "seed \(seed), round \(round): \(q)")
            }
            // A resumed stream: the events after a seq, by seq.
            for _ in 0..<50 {
                let after = Int64.random(in: 0...seq, using: &random)
                let read = try store.events(HistoryQuery(instance: "i1", afterSeq: after, limit: 1_000_000))
                #expect(read.map(\.seq) == expected.filter { $0.by > after }.map(\.seq), "seed \(seed), after \(after)")
            }
            print("PackedRowTests.randomized seed \(seed): \(expected.count) events in \(rows) rows, \(packed) packed")
        }
    }
}
