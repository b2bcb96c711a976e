import Foundation
import GRDB
import GRDBSQLite
import Logging
import Primitives

/// The writer's rows: a batch's events packed into rows (docs/history.md,
/// "Packed rows") and bound into multi-row INSERTs through SQLite's C API.
extension SQLiteStore {
    /// A row to insert: `events[last]`, and the pairs before it packed with it.
    struct PackedRow: Equatable {
        var last: Int
        var id: Int64
        var firstId: Int64?
        var firstAt: Double?
        /// The pairs before the last (indices of `events`): `more`'s text.
        var earlier: Range<Int>?
    }

    /// The rows for `events`, ids given from `highWater` on (docs/history.md,
    /// "Packed rows"): a run of performs kept with their requests, of one
    /// thread, one after the other in the batch, whose performs happened
    /// within `HistorySQL.packWindow` of the first, goes in one row, at most
    /// `HistorySQL.packMost` pairs; each pair takes an id, the row the last.
    static func rows(_ events: ArraySlice<StoredEvent>, after highWater: Int64) -> [PackedRow] {
        var rows: [PackedRow] = []
        var next = highWater
        var start = events.startIndex
        while start < events.endIndex {
            let first = events[start]
            var end = start + 1
            if first.request != nil, first.thread != nil, first.firstId == nil {
                while end < events.endIndex, end - start < HistorySQL.packMost {
                    let previous = events[end - 1]
                    let event = events[end]
                    guard event.request != nil, event.firstId == nil, event.thread == first.thread,
                        event.type == first.type, event.instance == first.instance, event.boot == first.boot,
                        event.seq > previous.seq + 1, event.at >= previous.at,
                        event.at - first.at <= HistorySQL.packWindow
                    else { break }
                    end += 1
                }
            }
            let pairs = Int64(end - start)
            var row = PackedRow(last: end - 1, id: next + pairs)
            if pairs > 1 {
                row.firstId = next + 1
                row.firstAt = first.at
                row.earlier = start..<(end - 1)
            }
            rows.append(row)
            next += pairs
            start = end
        }
        return rows
    }

    /// Events through SQLite's C API (packed first: `rows`), in multi-row
    /// INSERTs of a power of two rows (512, then the binary digits of what
    /// is left: ten texts, each prepared once per connection): each chunk's
    /// texts are copied once into one buffer, in one pass that also notes
    /// where each starts and how long it is, and bound in place from it with
    /// their lengths (no `SQLValue`, `DatabaseValue`, copy or `strlen` per
    /// value): the same values GRDB would bind. The ids are given here,
    /// after the largest given before (as AUTOINCREMENT would).
    /// `arena`: the buffer to copy the texts into (its capacity reused).
    static func insert(
        _ events: ArraySlice<StoredEvent>, _ db: Database, _ texts: [String], arena: inout [UInt8]
    ) throws {
        let rows = Self.rows(events, after: try SQLiteSegments.highWater(db))
        // Per row: instance, type, data, thread, request, more (start, length; length -1: NULL).
        var spans: [(start: Int32, count: Int32)] = []
        var start = rows.startIndex
        while start < rows.endIndex {
            var power = HistorySQL.largestInsertPower
            while 1 << power > rows.endIndex - start { power -= 1 }
            let chunk = rows[start..<(start + (1 << power))]
            let text = texts[power]
            let statement = try db.cachedStatement(sql: text).sqliteStatement
            arena.removeAll(keepingCapacity: true)
            spans.removeAll(keepingCapacity: true)
            func add(_ string: String?) {
                guard let string else {
                    spans.append((0, -1))
                    return
                }
                let from = arena.count
                arena.append(contentsOf: string.utf8)
                spans.append((Int32(from), Int32(arena.count - from)))
            }
            for row in chunk {
                let event = events[row.last]
                add(event.instance)
                add(event.type)
                add(event.data)
                add(event.thread)
                add(event.request)
                if let earlier = row.earlier {
                    // `more`, written straight into the buffer (`Pack`).
                    let from = arena.count
                    for pair in events[earlier] {
                        Pack.append(
                            seq: pair.seq, at: pair.at, requestAt: pair.requestAt ?? pair.at, data: pair.data,
                            request: pair.request ?? "", to: &arena)
                    }
                    spans.append((Int32(from), Int32(arena.count - from)))
                } else {
                    spans.append((0, -1))
                }
            }
            let code = arena.withUnsafeBufferPointer { buffer -> Int32 in
                // A chunk of empty texts has no buffer: any valid pointer does for length 0.
                let base = UnsafeRawPointer(buffer.baseAddress ?? UnsafePointer(bitPattern: 1)!)
                    .assumingMemoryBound(to: CChar.self)
                func bind(_ column: Int32, _ span: (start: Int32, count: Int32)) {
                    if span.count < 0 {
                        sqlite3_bind_null(statement, column)
                    } else {
                        sqlite3_bind_text(statement, column, base + Int(span.start), span.count, nil)
                    }
                }
                func bind(_ column: Int32, _ number: Double?) {
                    if let number {
                        sqlite3_bind_double(statement, column, number)
                    } else {
                        sqlite3_bind_null(statement, column)
                    }
                }
                sqlite3_reset(statement)
                for (index, row) in chunk.enumerated() {
                    let event = events[row.last]
                    let first = Int32(index * Self.insertedColumns.count)
                    let at = index * 6
                    sqlite3_bind_int64(statement, first + 1, row.id)
                    bind(first + 2, spans[at])
                    sqlite3_bind_int64(statement, first + 3, event.boot)
                    sqlite3_bind_int64(statement, first + 4, event.seq)
                    sqlite3_bind_double(statement, first + 5, event.at)
                    bind(first + 6, spans[at + 1])
                    bind(first + 7, spans[at + 3])
                    bind(first + 8, spans[at + 2])
                    bind(first + 9, spans[at + 4])
                    bind(first + 10, event.requestAt)
                    if let firstId = row.firstId {
                        sqlite3_bind_int64(statement, first + 11, firstId)
                    } else {
                        sqlite3_bind_null(statement, first + 11)
                    }
                    bind(first + 12, row.firstAt)
                    bind(first + 13, spans[at + 5])
                }
                let code = sqlite3_step(statement)
                // Nothing keeps a pointer into the buffer past here.
                sqlite3_reset(statement)
                sqlite3_clear_bindings(statement)
                return code
            }
            guard code == SQLITE_DONE else {
                throw DatabaseError(
                    resultCode: ResultCode(rawValue: code),
                    message: String(cString: sqlite3_errmsg(db.sqliteConnection)), sql: text)
            }
            start += chunk.count
        }
    }

    /// The columns SQLite's inserts give, in their order.
    static let insertedColumns = ["id"] + HistorySQL.insertedColumnNames + ["first_id", "first_at", "more"]

    /// The multi-row INSERT texts for segment `number`.
    func insertTexts(_ number: Int) -> [String] {
        if let texts = inserts.withLock({ $0.segment == number ? $0.texts : nil }) { return texts }
        let table = SQLiteSegments.table(number)
        let n = Self.insertedColumns.count
        let texts = (0...HistorySQL.largestInsertPower).map { power in
            let tuple = "(" + Array(repeating: "?", count: n).joined(separator: ", ") + ")"
            return
                "INSERT INTO \(table) (\(Self.insertedColumns.joined(separator: ", "))) VALUES "
                + Array(repeating: tuple, count: 1 << power).joined(separator: ", ")
        }
        inserts.withLock { $0 = (number, texts) }
        return texts
    }
}
