import Foundation
import GRDB
import GRDBSQLite
import Logging
import Primitives

/// Retention: the newest segment rolled over when full, events pruned by
/// age and by size, and the file compacted when it passes the limit.
extension SQLiteStore {
    /// Starts a new newest segment once the newest holds its share of the
    /// size bound's rows (by the rows' average size in the file), or its
    /// first event is older than its share of the age bound.
    func roll(_ db: Database, _ segments: [Int]) throws {
        guard let newest = segments.last, segments.count < SQLiteSegments.most, sizeLimit != nil || maxAge != nil
        else { return }
        let highWater = try SQLiteSegments.highWater(db)
        let (rows, since) = try SQLiteSegments.newest(db, newest, highWater: highWater)
        guard rows >= SQLiteSegments.fewestRows else { return }
        var due = false
        if let sizeLimit {
            let span = max(1, try SQLiteSegments.idSpan(db, segments, highWater: highWater))
            let (data, pageSize) = try Self.dataBytes(db)
            let perRow = max(1, data / span)
            let bytes = max(Int64(Double(sizeLimit) * SQLiteSegments.share), SQLiteSegments.fewestPages * pageSize)
            due = rows >= max(SQLiteSegments.fewestRows, bytes / perRow)
        }
        if let maxAge, let since, Date().timeIntervalSince1970 - since >= maxAge * SQLiteSegments.ageShare {
            due = true
        }
        guard due else { return }
        try SQLiteSegments.create(db, newest + 1, after: highWater)
        try SQLiteSegments.rebuildView(db, segments + [newest + 1])
    }

    /// Bytes in pages that hold data, and the page size.
    static func dataBytes(_ db: Database) throws -> (data: Int64, pageSize: Int64) {
        let pages = try Int64.fetchOne(db.cachedStatement(sql: "PRAGMA page_count")) ?? 0
        let free = try Int64.fetchOne(db.cachedStatement(sql: "PRAGMA freelist_count")) ?? 0
        let pageSize = try Int64.fetchOne(db.cachedStatement(sql: "PRAGMA page_size")) ?? Self.pageSize
        return ((pages - free) * pageSize, pageSize)
    }

    /// By age, then by size: when the data (pages in use) passes
    /// `triggerShare` of the limit, the oldest events go, at most
    /// `pruneStep` per transaction (the pages they free count at once),
    /// until the data is under `targetShare` of it. The freed pages stay in
    /// the file for the next commits to fill (moving pages to give them back
    /// wrote the file again, a WAL's worth at a time, at every prune): the
    /// file and its WAL stay near the limit. Only when they pass the limit
    /// itself (a lowered limit, a large WAL) do the free pages go back to the
    /// file system and the WAL get emptied: the file shrinks.
    ///
    /// `yield` is asked after each step (a delete, a WAL's worth of vacuum):
    /// true ends this call there. A size prune that stopped goes on at the
    /// next call (the writer calls after each commit while the file and its
    /// WAL pass the trigger): a large prune never holds the writer while its
    /// queue fills.
    public func prune(_ retention: Retention, now: Double, yield: () -> Bool) throws -> Int {
        var removed = 0
        let instance = retention.instance
        if let maxAge = retention.maxAge {
            removed += try writingDatabase { db in try pruneByAge(db, cutoff: now - maxAge, instance: instance) }
        }
        if let maxBytes = retention.maxBytes {
            let target = Int64(Double(maxBytes) * Self.targetShare)
            var data = try size()
            let resuming = sizePruning.withLock { $0 }
            if data > target, resuming || Double(data) > Double(maxBytes) * Self.triggerShare {
                sizePruning.withLock { $0 = true }
                // The average row's size from the span of ids (no count: it reads a whole index).
                let span = try readingDatabase { db in try SQLiteSegments.idSpan(db, try SQLiteSegments.list(db)) }
                let keep = newestBatch.withLock { $0 }
                while data > target {
                    let perRow = max(1, data / max(1, span))
                    let step = min(Self.pruneStep, max(Self.smallestPruneStep, Int(maxBytes / 100 / perRow)))
                    let n = min(step, max(1, Int((data - target) / perRow) + 1))
                    let gone = try writingDatabase { db in try deleteOldest(db, n, instance: instance, below: keep) }
                    removed += gone
                    if gone == 0 { break }
                    data = try size()
                    // The bound before the queue: a prune gives way to waiting
                    // events only once the data is back under the trigger (the
                    // queue, bounded in bytes, drops its oldest meanwhile).
                    if data > target, Double(data) <= Double(maxBytes) * Self.triggerShare, yield() { return removed }
                }
                sizePruning.withLock { $0 = false }
            }
            if fileBytes() > maxBytes { try compact(maxBytes: maxBytes, yield: yield) }
        }
        return removed
    }

    /// The oldest events: the oldest segment whole when it is not the
    /// newest and holds no other instance's events (`instance` nil: any),
    /// else the oldest `n` rows of `instance` (or of all) in the oldest
    /// segment that has some, one by one. Empty older segments go too.
    /// The events that went (rows and the requests kept in them).
    /// `below`: rows from this id on are never deleted (the newest batch).
    private func deleteOldest(_ db: Database, _ n: Int, instance: String?, below: Int64) throws -> Int {
        var segments = try SQLiteSegments.list(db)
        for number in segments {
            let name = SQLiteSegments.table(number)
            let empty = try Int64.fetchOne(db, sql: "SELECT MIN(id) FROM \(name)") == nil
            if number != segments.last {
                if empty {
                    _ = try SQLiteSegments.drop(db, number, segments: segments)
                    segments.removeAll { $0 == number }
                    continue
                }
                let newest = try Int64.fetchOne(db, sql: "SELECT MAX(id) FROM \(name)") ?? .max
                if newest < below, try instance.map({ try SQLiteSegments.onlyOf(db, number, instance: $0) }) ?? true {
                    return try SQLiteSegments.drop(db, number, segments: segments)
                }
            }
            if empty { continue }
            if let instance,
                try Bool.fetchOne(db, sql: "SELECT 1 FROM \(name) WHERE instance = ? LIMIT 1", arguments: [instance])
                    == nil
            {
                continue
            }
            return try Self.logic(db, logic).deleteOldest(n, instance: instance, table: name, below: below) ?? 0
        }
        return 0
    }

    /// Events before `cutoff`: whole segments (not the newest) whose newest
    /// event is older and that hold no other instance's events; then row
    /// by row in the rest. Threads that ended before it too.
    private func pruneByAge(_ db: Database, cutoff: Double, instance: String?) throws -> Int {
        var segments = try SQLiteSegments.list(db)
        var removed = 0
        for number in segments.dropLast() {
            let newestAt = try Double.fetchOne(db, sql: "SELECT MAX(at) FROM \(SQLiteSegments.table(number))")
            guard newestAt.map({ $0 < cutoff }) ?? true else { break }
            guard try instance.map({ try SQLiteSegments.onlyOf(db, number, instance: $0) }) ?? true else { continue }
            removed += try SQLiteSegments.drop(db, number, segments: segments)
            segments.removeAll { $0 == number }
        }
        return removed
            + (try Self.logic(db, logic).pruneByAge(
                0, now: cutoff, instance: instance, tables: segments.map(SQLiteSegments.table)))
    }

    /// Gives the free pages back to the file system: the incremental vacuum
    /// moves pages in use into the free ones and cuts the file's end, a WAL's
    /// worth of pages per transaction; the checkpoint copies the WAL into the
    /// file and empties it. Stops early (no checkpoint) when `yield` says so.
    /// It gives way to `yield` only once the file and its WAL are within `maxBytes`.
    private func compact(maxBytes: Int64, yield: () -> Bool) throws {
        do {
            try database().writeWithoutTransaction { db in
                let pageSize = max(512, try Int64.fetchOne(db, sql: "PRAGMA page_size") ?? Self.pageSize)
                let pages = max(4, walBytes / pageSize)
                while try Int.fetchOne(db, sql: "PRAGMA freelist_count") ?? 0 > 0 {
                    try db.execute(sql: "PRAGMA incremental_vacuum(\(pages))")
                    if fileBytes() <= maxBytes, yield() { return }
                }
                try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)")
            }
        } catch {
            throw StoreError("\(location): \(Self.reason(error))")
        }
    }
}
