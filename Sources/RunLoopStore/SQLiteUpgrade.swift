import Foundation
import GRDB
import Logging

/// The SQLite file's schema versions and the upgrade of an older file
/// (docs/upgrades.md). GRDB records each version a
/// file has had in its `grdb_migrations` table; at open, before anything
/// changes an existing file that needs a migration (or the one-time VACUUM
/// into incremental auto-vacuum), a copy of it is made next to it with
/// `VACUUM INTO` (`<file>.<from>-<UTC time>.bak`, mode 0600), and the
/// migration is logged with its versions and duration. A file that a newer
/// runloopd migrated further than this one knows is refused, unchanged.
/// Called from `SQLiteStore.open` only (the writer thread or a reader).
enum SQLiteUpgrade {
    /// The schema versions, oldest first.
    static func migrator() -> DatabaseMigrator {
        let sql = HistorySQL(dialect: .sqlite)
        let v1 = sql.schema
        let v2 = sql.schemaV2
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            for statement in v1 { try db.execute(sql: statement) }
        }
        migrator.registerMigration("v2") { db in
            for statement in v2 { try db.execute(sql: statement) }
        }
        migrator.registerMigration("v3", migrate: SQLiteSegments.migrate)
        migrator.registerMigration("v4", migrate: SQLiteSegments.addPackColumns)
        return migrator
    }

    /// The newest version this runloopd writes.
    static let newest = "v4"

    /// What an open finds in a file.
    struct Found: Equatable {
        /// Nothing in it yet (a new file).
        var empty: Bool
        /// `PRAGMA auto_vacuum` (2: incremental).
        var autoVacuum: Int
        /// The versions it has had that this runloopd knows, oldest first.
        var applied: [String]
        /// The versions it has had that this runloopd does not know (a newer runloopd's).
        var unknown: [String]

        var from: String { applied.last ?? "none" }
    }

    static func inspect(_ db: Database, _ migrator: DatabaseMigrator) throws -> Found {
        let tables = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM sqlite_master") ?? 0
        let autoVacuum = try Int.fetchOne(db, sql: "PRAGMA auto_vacuum") ?? 0
        guard try db.tableExists("grdb_migrations") else {
            return Found(empty: tables == 0, autoVacuum: autoVacuum, applied: [], unknown: [])
        }
        let recorded = try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations")
        let known = migrator.migrations
        return Found(
            empty: false, autoVacuum: autoVacuum, applied: known.filter(recorded.contains),
            unknown: recorded.filter { !known.contains($0) }.sorted())
    }

    /// Refuses a newer file, copies an older one, migrates it, and logs what it did.
    static func upgrade(_ pool: DatabasePool, path: String, logger: Logger, now: Date = Date()) throws {
        let migrator = migrator()
        let found = try pool.read { try inspect($0, migrator) }
        if !found.unknown.isEmpty {
            throw StoreError(
                "\(path) has schema \(found.unknown.joined(separator: ", ")) from a newer runloopd; this one knows "
                    + "\(migrator.migrations.joined(separator: ", ")). Run the newer runloopd, or restore the copy "
                    + "it made before its upgrade (\(path).\(newest)-*.bak); docs/upgrades.md",
                configuration: true)
        }
        let pending = migrator.migrations.filter { !found.applied.contains($0) }
        let vacuum = found.autoVacuum != 2
        if found.empty {
            let started = Date()
            try migrator.migrate(pool)
            logger.debug(
                "history store created",
                metadata: [
                    "store": "\(path)", "schema": "\(newest)",
                    "seconds": "\(seconds(since: started))",
                ])
            return
        }
        guard vacuum || !pending.isEmpty else { return }
        let backup = try copy(pool, path: path, from: found.from, now: now, logger: logger)
        let started = Date()
        if vacuum {
            // A file made before incremental auto-vacuum: VACUUM rebuilds it once in that mode.
            try pool.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA auto_vacuum = INCREMENTAL")
                try db.execute(sql: "VACUUM")
            }
        }
        try migrator.migrate(pool)
        logger.info(
            "history store migrated",
            metadata: [
                "store": "\(path)", "from": "\(found.from)", "to": "\(newest)",
                "steps": "\(pending.joined(separator: ","))", "vacuum": "\(vacuum)",
                "seconds": "\(seconds(since: started))", "backup": "\(backup)",
            ])
    }

    /// The copy made before a migration: `<file>.<from>-<UTC time>.bak` next to the file, 0600.
    static func backupPath(_ path: String, from: String, now: Date) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
        return "\(path).\(from)-\(formatter.string(from: now)).bak"
    }

    private static func copy(
        _ pool: DatabasePool, path: String, from: String, now: Date, logger: Logger
    ) throws -> String {
        let backup = backupPath(path, from: from, now: now)
        let started = Date()
        do {
            // Made empty and 0600 first (the history holds request bodies): VACUUM INTO fills an empty file.
            try SQLiteStore.restrict(backup)
            try pool.writeWithoutTransaction { db in
                try db.execute(sql: "VACUUM INTO ?", arguments: [backup])
            }
        } catch {
            try? FileManager.default.removeItem(atPath: backup)
            throw StoreError(
                "cannot copy \(path) to \(backup) before upgrading it from \(from) to \(newest): "
                    + "\(SQLiteStore.reason(error)); the file is unchanged (the copy needs about its size free)")
        }
        var info = stat()
        let bytes = stat(backup, &info) == 0 ? Int64(info.st_size) : 0
        logger.info(
            "history store copied before its upgrade",
            metadata: [
                "store": "\(path)", "backup": "\(backup)", "bytes": "\(bytes)",
                "seconds": "\(seconds(since: started))",
            ])
        return backup
    }

    private static func seconds(since start: Date) -> String {
        String(format: "%.3f", Date().timeIntervalSince(start))
    }
}
