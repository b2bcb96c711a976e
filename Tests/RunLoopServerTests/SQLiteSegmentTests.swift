import Foundation
import GRDB
@testable import RunLoopStore
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
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("segments-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let path = dir.appendingPathComponent("history.sqlite").path
        let store = SQLiteStore(path: path, sizeLimit: sizeLimit, maxAge: maxAge)
        try store.open()
        defer { store.close() }
        _ = try store.register(HistoryStoreTests.instance("i1"))
        try body(store, path)
    }

    /// A bound of 4 MB: segments of 1 MiB (their least), about 4,000 events of 1 KB in all.
    static let limit: Int64 = 4_000_000

    /// Each segment's number and its smallest and largest id (nil when empty), oldest first.
    static func segments(_ path: String) throws -> [(number: Int, first: Int64?, last: Int64?)] {
        let db = try DatabaseQueue(path: path)
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
            let db = try DatabaseQueue(path: path)
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
}
