import Foundation
import GRDB
@testable import RunLoopStore
import RunLoopTestSupport
import Testing

/// SQLite's segments (docs/history.md, "Segments"): a bounded store's
/// events roll over into new tables, retention drops the oldest whole, and
/// the `events` view reads, takes inserts and deletes as one table.
@Suite("SQLite segments")
struct SQLiteSegmentTests {
    /// A store of `sizeLimit` and `maxAge` in a new folder, opened, with instance i1 registered.
    static func withStore(sizeLimit: Int64?, maxAge: Double? = nil, _ body: (SQLiteStore, String) throws -> Void)
        throws
    {
        try withTemporaryPath("segments") { dir in
            let path = dir.appendingPathComponent("history.sqlite").path
            let store = SQLiteStore(path: path, sizeLimit: sizeLimit, maxAge: maxAge)
            try store.open()
            defer { store.close() }
            _ = try store.register(HistoryStoreTests.instance("i1"))
            try body(store, path)
        }
    }

    /// A bound of 4 MB: segments of 1 MiB (their least), about 4,000 events of 1 KB in all.
    static let limit: Int64 = 4_000_000

    /// Each segment's number and its smallest and largest id (nil when empty), oldest first.
    static func segments(_ path: String) throws -> [(number: Int, first: Int64?, last: Int64?)] {
        let db = try DatabaseQueue.patient(path)
        defer { try? db.close() }
        return try db.read { db in
            try SQLiteSegments.list(db).map { number in
                let row = try Row.fetchOne(db, sql: "SELECT MIN(id), MAX(id) FROM \(SQLiteSegments.table(number))")
                return (number, row?[0], row?[1])
            }
        }
    }

    @Test("a bounded store rolls over into segments; the size prune drops the oldest whole; ids never repeat")
    func sizeBound() throws {
        try Self.withStore(sizeLimit: Self.limit) { store, path in
            let retention = Retention(maxAge: nil, maxBytes: Self.limit, instance: "i1")
            var pruned = 0
            for first in stride(from: Int64(1), to: 12_001, by: 50) {
                try store.write(StoreBatch(events: (first..<first + 50).map { StoreOperationsTests.event("i1", $0) }))
                if store.overLimit(retention) { pruned += try store.prune(retention, now: Double(first)) }
            }
            let segments = try Self.segments(path)
            // 1 MiB each (64 pages, more than a tenth of this bound): several, the first ones gone.
            #expect(segments.count >= 3, "\(segments.map(\.number))")
            #expect((segments.first?.number ?? 0) > 3, "\(segments.map(\.number))")
            // Their ids follow each other: every segment's after the one before.
            let ranges = segments.compactMap { s in s.first.flatMap { f in s.last.map { f...$0 } } }
            for (older, newer) in zip(ranges, ranges.dropFirst()) { #expect(older.upperBound < newer.lowerBound) }
            // Read through the view: the newest events, contiguous, each once, in id order.
            let kept = try store.events(HistoryQuery(limit: 100_000, ascending: true))
            #expect(kept.last?.seq == 12_000)
            #expect(kept.map(\.seq) == Array(kept[0].seq...12_000))
            #expect(kept.map(\.id) == kept.map(\.id).sorted() && Set(kept.map(\.id)).count == kept.count)
            #expect(pruned == 12_000 - kept.count, "the prunes count every event that went")
            #expect(try store.size() <= Self.limit)

            // Newest first through the view's merge, limited.
            let newest = try store.events(HistoryQuery(limit: 3))
            #expect(newest.map(\.seq) == [12_000, 11_999, 11_998])

            // Another program's INSERT and DELETE through the view reach the segments.
            let db = try DatabaseQueue.patient(path)
            defer { try? db.close() }
            let highWater = try #require(ranges.last?.upperBound)
            try db.write { db in
                try db.execute(
                    sql:
                        "INSERT INTO events (instance, boot, seq, at, type, thread, data) VALUES ('i1', 1, 12001, 12001, 'perform', 't1', '{}')"
                )
                try db.execute(sql: "DELETE FROM events WHERE seq = 11000 AND instance = 'i1'")
            }
            let newestTable = SQLiteSegments.table(try #require(segments.last?.number))
            let inserted = try db.read {
                try Int64.fetchOne($0, sql: "SELECT id FROM \(newestTable) WHERE seq = 12001")
            }
            #expect(inserted == highWater + 1)
            let after = try store.events(HistoryQuery(limit: 100_000, ascending: true)).map(\.seq)
            #expect(after.last == 12_001 && !after.contains(11_000))
        }
    }

    @Test("the ids go on above every id given, after the oldest segments are dropped and the store reopened")
    func idsNeverRepeat() throws {
        try Self.withStore(sizeLimit: Self.limit) { store, path in
            let retention = Retention(maxAge: nil, maxBytes: Self.limit, instance: nil)
            var largest: Int64 = 0
            for round in 0..<3 {
                for first in stride(from: Int64(round * 8_000 + 1), to: Int64(round * 8_000 + 8_001), by: 50) {
                    try store.write(
                        StoreBatch(events: (first..<first + 50).map { StoreOperationsTests.event("i1", $0) }))
                    if store.overLimit(retention) { _ = try store.prune(retention, now: Double(first)) }
                }
                let ids = try store.events(HistoryQuery(limit: 100_000, ascending: true)).map(\.id)
                #expect((ids.first ?? 0) > largest, "round \(round): \(ids.first ?? 0) after \(largest)")
                largest = ids.last ?? largest
                // Everything but the newest segment goes (an age prune of all).
                _ = try store.prune(Retention(maxAge: 0.001, maxBytes: nil), now: 1e12)
                #expect(try store.events(HistoryQuery(limit: 10)).isEmpty)
                store.close()
                try store.open()
            }
            #expect(try Self.segments(path).count == 1)
        }
    }

    @Test("an age bound rolls segments by time; the age prune drops those wholly older than the cutoff")
    func ageBound() throws {
        let now = Date().timeIntervalSince1970
        try Self.withStore(sizeLimit: nil, maxAge: 1_000) { store, path in
            // 30 batches of 100 events, 100 s apart: the newest segment's first
            // event is soon older than a tenth of the age bound.
            for batch in 0..<30 {
                let at = now - Double(30 - batch) * 100
                let first = Int64(batch * 100 + 1)
                try store.write(
                    StoreBatch(events: (first..<first + 100).map { StoreOperationsTests.event("i1", $0, at: at) }))
            }
            let before = try Self.segments(path)
            #expect(before.count >= 10, "\(before.map(\.number))")
            let removed = try store.prune(Retention(maxAge: 1_000, maxBytes: nil, instance: "i1"), now: now)
            let kept = try store.events(HistoryQuery(limit: 100_000, ascending: true))
            #expect(removed + kept.count == 3_000)
            #expect(kept.allSatisfy { $0.at >= now - 1_000 })
            #expect(kept.count == 1_000, "the events of the last 1,000 s: 10 batches of 100")
            #expect(try Self.segments(path).count < before.count)
        }
    }

    @Test("scope instance: a segment that holds another instance's events stays; this instance's rows go one by one")
    func otherInstanceStays() throws {
        try Self.withStore(sizeLimit: Self.limit) { store, _ in
            try store.write(StoreBatch(events: (1...50).map { StoreOperationsTests.event("other", $0) }))
            let retention = Retention(maxAge: nil, maxBytes: Self.limit, instance: "i1")
            for first in stride(from: Int64(1), to: 12_001, by: 50) {
                try store.write(StoreBatch(events: (first..<first + 50).map { StoreOperationsTests.event("i1", $0) }))
                if store.overLimit(retention) { _ = try store.prune(retention, now: Double(first)) }
            }
            #expect(try StoreOperationsTests.seqs(store, "other") == Array(1...50))
            let mine = try StoreOperationsTests.seqs(store, "i1")
            #expect(mine.last == 12_000 && mine == Array(mine[0]...12_000) && mine.count < 12_000)
        }
    }

    @Test(
        "random writes, prunes and reopenings keep each instance's newest events, whole, once, in id order (seed printed)"
    )
    func randomized() throws {
        // Seeds that ever failed are kept here, then a fresh one.
        for seed in [UInt64.random(in: 1...UInt64.max)] {
            print("SQLiteSegmentTests.randomized seed \(seed)")
            try Self.randomized(seed: seed)
        }
    }

    /// One written event as the model knows it.
    struct Written {
        let instance: String
        let seq: Int64
        let at: Double
    }

    static func randomized(seed: UInt64) throws {
        var random = SplitMix(seed)
        let limit = Int64.random(in: 2_000_000...5_000_000, using: &random)
        let maxAge: Double? = Bool.random(using: &random) ? 1_000 : nil
        let scope: String? = Bool.random(using: &random) ? "i1" : nil
        let context = "seed \(seed): limit \(limit), age \(maxAge.map { "\($0)" } ?? "none"), scope \(scope ?? "fleet")"
        try Self.withStore(sizeLimit: limit, maxAge: maxAge) { store, path in
            var written: [Written] = []
            var seqs = ["i1": Int64(0), "other": 0]
            var removed = 0
            var largestId: Int64 = 0
            // Simulated time, in the past: an age bound rolls segments over by it.
            var clock = Date().timeIntervalSince1970 - 20_000
            for step in 0..<120 {
                switch Int.random(in: 0..<10, using: &random) {
                case 0..<6:
                    // A batch: mostly i1's, sometimes another instance's; some rows keep a request.
                    let instance = Int.random(in: 0..<12, using: &random) == 0 ? "other" : "i1"
                    var events: [StoredEvent] = []
                    for _ in 0..<Int.random(in: 1...150, using: &random) {
                        clock += Double.random(in: 0.001...2, using: &random)
                        let seq = seqs[instance, default: 0] + 1
                        let pad = String(repeating: "x", count: Int.random(in: 50...1_500, using: &random))
                        var event = StoredEvent(
                            instance: instance, boot: 1, seq: seq, at: clock, type: "perform", thread: "t1",
                            data: #"{"pad":"\#(pad)"}"#)
                        written.append(Written(instance: instance, seq: seq, at: clock))
                        seqs[instance] = seq
                        if Bool.random(using: &random) {
                            event.request = #"{"ok":true}"#
                            event.requestAt = clock
                            written.append(Written(instance: instance, seq: seq + 1, at: clock))
                            seqs[instance] = seq + 1
                        }
                        events.append(event)
                    }
                    try store.write(StoreBatch(events: events))
                    // Its events are the newest (a packed row holds several: at least as many rows as events).
                    let count = events.count + events.filter { $0.request != nil }.count
                    let newest = try store.events(HistoryQuery(limit: events.count)).prefix(count)
                    #expect(newest.count == count, "\(context), step \(step): the batch read back")
                    #expect(newest.allSatisfy { $0.id > largestId }, "\(context), step \(step): ids above \(largestId)")
                    largestId = newest.map(\.id).max() ?? largestId
                case 6..<8:
                    let retention = Retention(maxAge: nil, maxBytes: limit, instance: scope)
                    if store.overLimit(retention) {
                        removed += try store.prune(retention, now: clock)
                        // Every event may go (the fleet's scope): the data is under the bound.
                        if scope == nil { #expect(try store.size() <= limit, "\(context), step \(step): size") }
                    }
                case 8:
                    let age = Double.random(in: 100...10_000, using: &random)
                    removed += try store.prune(Retention(maxAge: age, maxBytes: nil, instance: scope), now: clock)
                default:
                    store.close()
                    try store.open()
                }
                let kept = try store.events(HistoryQuery(limit: 1_000_000, ascending: true))
                let ids = kept.map(\.id)
                #expect(zip(ids, ids.dropFirst()).allSatisfy { $0 <= $1 }, "\(context), step \(step): id order")
                #expect(removed + kept.count == written.count, "\(context), step \(step): counts")
                for instance in ["i1", "other"] {
                    let mine = written.filter { $0.instance == instance }.map(\.seq)
                    let left = kept.filter { $0.instance == instance }.map(\.seq)
                    // Each instance keeps its newest events, whole: a suffix of what it wrote.
                    #expect(Array(mine.suffix(left.count)) == left, "\(context), step \(step): \(instance)")
                }
                if scope == "i1" {
                    // This instance's retention never touches another's events.
                    #expect(
                        kept.filter { $0.instance == "other" }.count == written.filter { $0.instance == "other" }.count,
                        "\(context), step \(step): another instance's events")
                }
            }
            let db = try DatabaseQueue.patient(path)
            defer { try? db.close() }
            #expect(try db.read { try String.fetchOne($0, sql: "PRAGMA integrity_check") } == "ok", "\(context)")
            print(
                "SQLiteSegmentTests.randomized \(context): \(written.count) events written, \(removed) pruned, \(try Self.segments(path).count) segments"
            )
        }
    }
}
