import Foundation
import GRDB

/// The SQLite store's events live in segments (docs/history.md, "Segments"):
/// tables `events_1`, `events_2`, … of the same columns, each holding a
/// range of row ids, oldest first. New rows go to the newest; retention
/// drops the oldest table whole (a few page writes per thousand rows)
/// instead of deleting its rows one by one (every row out of the table and
/// its three indexes: as costly as writing it). `events` is a view over
/// all of them, so every query reads as from one table, and SQLite merges
/// the segments' index scans for an ordered, limited query. Triggers on the
/// view send an INSERT or a DELETE through it to the segments.
enum SQLiteSegments {
    static let prefix = "events_"

    static func table(_ number: Int) -> String { "\(prefix)\(number)" }

    /// Most segments a file keeps: past it the newest grows instead (SQLite
    /// merges at most 500 terms of a compound query; ten or so are usual).
    static let most = 40
    /// The size bound's share of one segment: a segment rolls over once it
    /// holds this share of `--retention-size`'s worth of rows.
    static let share = 0.1
    /// The age bound's share: a segment whose first event is older than
    /// this share of `--retention` rolls over.
    static let ageShare = 0.1
    /// The fewest rows a segment rolls over at (a small bound).
    static let fewestRows: Int64 = 64
    /// The least a segment holds before the size bound rolls it over, in
    /// pages: each segment costs four pages at least (its table and three
    /// indexes), which a small bound could not spare ten times over.
    static let fewestPages: Int64 = 64

    /// The segments' numbers, oldest first.
    static func list(_ db: Database) throws -> [Int] {
        try String.fetchAll(
            db.cachedStatement(sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name GLOB 'events_[0-9]*'")
        )
        .compactMap { Int($0.dropFirst(prefix.count)) }.sorted()
    }

    /// Version 3 of the schema: the one `events` table becomes the first
    /// segment (its rows, indexes and id sequence kept) under the view.
    static func migrate(_ db: Database) throws {
        try db.execute(sql: "ALTER TABLE events RENAME TO \(table(1))")
        try rebuildView(db, [1], columns: HistorySQL.eventColumns)
    }

    /// Version 4: packed rows (docs/history.md, "Packed rows"): three
    /// columns in every segment, NULL in every row written before. Run at
    /// every open too: a segment an older runloopd made lacks them.
    static func addPackColumns(_ db: Database) throws {
        let segments = try list(db)
        var added = false
        for number in segments {
            let name = table(number)
            let present = Set(
                try Row.fetchAll(db, sql: "PRAGMA table_info(\(name))").compactMap { $0["name"] as String? })
            for (column, type) in [("first_id", "INTEGER"), ("first_at", "REAL"), ("more", "TEXT")]
            where !present.contains(column) {
                try db.execute(sql: "ALTER TABLE \(name) ADD COLUMN \(column) \(type)")
                added = true
            }
        }
        if added { try rebuildView(db, segments) }
    }

    /// A new newest segment, its ids following every id given before.
    static func create(_ db: Database, _ number: Int, after highWater: Int64) throws {
        let name = table(number)
        try db.execute(
            sql: """
                CREATE TABLE \(name) (
                    id INTEGER PRIMARY KEY AUTOINCREMENT, instance TEXT NOT NULL, boot INTEGER NOT NULL,
                    seq INTEGER NOT NULL, at REAL NOT NULL, type TEXT NOT NULL, thread TEXT, data TEXT NOT NULL,
                    request TEXT, request_at REAL, first_id INTEGER, first_at REAL, more TEXT)
                """)
        try db.execute(sql: "CREATE INDEX \(name)_instance_seq ON \(name) (instance, seq)")
        try db.execute(sql: "CREATE INDEX \(name)_at ON \(name) (at)")
        try db.execute(sql: "CREATE INDEX \(name)_thread ON \(name) (thread, id)")
        // AUTOINCREMENT's record: the first id is the one after `highWater`.
        try db.execute(sql: "INSERT INTO sqlite_sequence (name, seq) VALUES (?, ?)", arguments: [name, highWater])
    }

    /// The largest id ever given (AUTOINCREMENT's record of each segment; a
    /// dropped segment's goes with it, but the newest is never dropped).
    static func highWater(_ db: Database) throws -> Int64 {
        try Int64.fetchOne(
            db.cachedStatement(sql: "SELECT MAX(seq) FROM sqlite_sequence WHERE name GLOB 'events_[0-9]*'")) ?? 0
    }

    /// The view over `segments` and its triggers, made again.
    /// `columns`: the view's (a migration before version 4 has fewer).
    static func rebuildView(
        _ db: Database, _ segments: [Int],
        columns: String = "\(HistorySQL.eventColumns), \(HistorySQL.packColumns)"
    ) throws {
        try db.execute(sql: "DROP TRIGGER IF EXISTS events_insert")
        try db.execute(sql: "DROP TRIGGER IF EXISTS events_delete")
        try db.execute(sql: "DROP VIEW IF EXISTS events")
        let union = segments.map { "SELECT \(columns) FROM \(table($0))" }
            .joined(separator: " UNION ALL ")
        try db.execute(sql: "CREATE VIEW events AS \(union)")
        guard let newest = segments.last else { return }
        let inserted = HistorySQL.insertedColumnNames
        try db.execute(
            sql: """
                CREATE TRIGGER events_insert INSTEAD OF INSERT ON events BEGIN
                INSERT INTO \(table(newest)) (\(inserted.joined(separator: ", ")))
                VALUES (\(inserted.map { "NEW.\($0)" }.joined(separator: ", "))); END
                """)
        let deletes = segments.map { "DELETE FROM \(table($0)) WHERE id = OLD.id;" }.joined(separator: " ")
        try db.execute(sql: "CREATE TRIGGER events_delete INSTEAD OF DELETE ON events BEGIN \(deletes) END")
    }

    /// Whether segment `number` holds no event of another instance than
    /// `instance` (two seeks of its (instance, seq) index).
    static func onlyOf(_ db: Database, _ number: Int, instance: String) throws -> Bool {
        let name = table(number)
        let below = try Bool.fetchOne(
            db, sql: "SELECT 1 FROM \(name) WHERE instance < ? LIMIT 1", arguments: [instance])
        let above = try Bool.fetchOne(
            db, sql: "SELECT 1 FROM \(name) WHERE instance > ? LIMIT 1", arguments: [instance])
        return below == nil && above == nil
    }

    /// Drops segment `number` (never the newest); the events it held (its
    /// rows and the requests kept in them).
    static func drop(_ db: Database, _ number: Int, segments: [Int]) throws -> Int {
        let name = table(number)
        let events =
            try Int.fetchOne(
                db, sql: "SELECT COUNT(*) + COUNT(request) + 2 * COALESCE(SUM(id - first_id), 0) FROM \(name)") ?? 0
        try rebuildView(db, segments.filter { $0 != number })
        try db.execute(sql: "DROP TABLE \(name)")
        return events
    }

    /// The span of row ids (the largest given less the oldest segment's
    /// smallest, plus one): the number of rows where ids are dense (the
    /// oldest go first), at the cost of a few index lookups, not a count.
    /// `highWater`: `highWater(db)`, when the caller has it already.
    static func idSpan(_ db: Database, _ segments: [Int], highWater known: Int64? = nil) throws -> Int64 {
        var smallest: Int64?
        for number in segments {
            smallest = try Int64.fetchOne(db, sql: "SELECT MIN(id) FROM \(table(number))")
            if smallest != nil { break }
        }
        guard let smallest else { return 0 }
        return max(0, try (known ?? highWater(db)) - smallest + 1)
    }

    /// Rows since the newest segment began (its ids' span), and when its
    /// oldest event happened (nil when it is empty).
    static func newest(_ db: Database, _ number: Int, highWater: Int64) throws -> (rows: Int64, since: Double?) {
        let name = table(number)
        guard let first = try Int64.fetchOne(db, sql: "SELECT MIN(id) FROM \(name)") else { return (0, nil) }
        let since = try Double.fetchOne(db, sql: "SELECT MIN(at) FROM \(name)")
        return (highWater - first + 1, since)
    }
}
