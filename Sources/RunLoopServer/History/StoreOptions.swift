import Foundation
import Logging
import RunLoopStore

/// How the history store is used (`--store`, `--data-dir`, `--retention`, …).
public struct StoreOptions: Sendable {
    /// Whether events are kept at all. The library default is off (tests and
    /// embedders opt in); the `runloopd` command turns it on unless `--no-store`.
    public var enabled = false
    /// `sqlite` (a file in `dataDirectory`), `sqlite:PATH`, or `postgres://…`.
    public var url = "sqlite"
    /// Where the SQLite file lives.
    public var dataDirectory = StoreOptions.defaultDataDirectory()
    /// What is kept.
    public var retention = Retention(maxAge: 7 * 86_400, maxBytes: 256_000_000)
    /// Whose history the retention prunes: this instance's only (the
    /// default), or every instance's (`--retention-scope fleet`, for one
    /// designated instance of a fleet).
    public var retentionScope = RetentionScope.instance
    /// A file holding the PostgreSQL password (`--store-password-file`).
    public var passwordFile: String?
    /// Events waiting for the writer; a full queue drops the oldest.
    public var queueCapacity = 65_536
    /// Bytes of event text waiting for the writer (`--store-queue-bytes`);
    /// past it the oldest queued events are dropped (and counted).
    public var queueBytes = 16_000_000
    /// Most bytes of one event's stored text (`--store-event-bytes`): a
    /// longer one is cut with a marker (`EventCut`), never dropped.
    public var eventBytes = 8_192
    /// The least `eventBytes`: a cut's markers must fit.
    public static let smallestEventBytes = EventCut.smallest
    /// How far the writer thread's nice value is above the process's (0: as
    /// the loops; higher: it yields the CPUs when they are saturated, and the
    /// queue fills meanwhile).
    public var writerNice: Int32 = 0
    /// The writer commits at most this often (seconds).
    public var flushInterval = 0.1
    /// How often this instance says it is alive (seconds).
    public var heartbeatInterval = 5.0
    /// How often the retention runs (seconds).
    public var retentionInterval = 60.0
    /// The writer's back-off between two tries of a failing store (seconds):
    /// the first wait, doubled at each failure up to the longest. Not a
    /// flag: fleet health allows for `HistoryRecorder.longestBackoff` (tests
    /// set a back-off that never ends by itself).
    var backoff = HistoryRecorder.shortestBackoff...HistoryRecorder.longestBackoff
    /// Most events a resumed stream (`Last-Event-ID`) or one history page returns.
    public var replayLimit = 10_000
    /// This instance's id (nil: host name and port).
    public var instanceId: String?
    /// Where other instances reach this one's dashboard (nil: from host and port).
    public var advertiseURL: String?
    /// How long a PostgreSQL connection attempt may take (seconds).
    public var connectTimeout = 2.0
    /// How long one PostgreSQL statement may take before the connection is
    /// dropped and the batch retried (seconds).
    public var queryTimeout = 10.0

    public init() {}

    /// Bytes of queued text one transaction takes at most: a thirty-second
    /// of the size bound (so a commit's pages, in the WAL until a checkpoint,
    /// stay a small share of it), at least 64 KiB, at most the queue's
    /// bound. Measured at the floor under load: with 256 KiB at least, the
    /// WAL reached 1.2 MB and a commit took 280 ms; with 64 KiB, 0.38 MB
    /// and 12 ms (smaller commits, smaller prunes after each).
    public var batchBytes: Int {
        let share = retention.maxBytes.map { Int(clamping: $0 / 32) } ?? Int.max
        return max(1, min(queueBytes, max(64 << 10, share)))
    }

    /// The smallest `--retention-size` (bytes) a store of these options
    /// accepts, and the empty store's size it is derived from (docs/history.md,
    /// "The floor"): nil when it cannot be measured.
    public static func retentionFloor() -> (floor: Int64, empty: Int64)? {
        guard let empty = try? SQLiteStore.emptyBytes() else { return nil }
        return (SQLiteStore.floor(empty: empty), empty)
    }

    /// `$XDG_STATE_HOME/runloopd`, else `~/.local/state/runloopd`, else `/var/lib/runloopd`.
    public static func defaultDataDirectory() -> String {
        let environment = ProcessInfo.processInfo.environment
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") { return state + "/runloopd" }
        if let home = environment["HOME"], home.hasPrefix("/"), home != "/" {
            return home + "/.local/state/runloopd"
        }
        return "/var/lib/runloopd"
    }

    /// The SQLite file these options name (nil for PostgreSQL).
    var sqlitePath: String? {
        if url == "sqlite" { return dataDirectory + "/history.sqlite" }
        if url.hasPrefix("sqlite:") { return String(url.dropFirst("sqlite:".count)) }
        return nil
    }

    /// With SQLite, the instance id kept next to the file (`instance-id`),
    /// written on the first start: the same data folder is the same instance
    /// whatever port or host name a later start gets. Otherwise `fallback`.
    func rememberedInstanceId(fallback: String) -> String {
        guard enabled, let path = sqlitePath else { return fallback }
        let file = (path as NSString).deletingLastPathComponent + "/instance-id"
        if let data = FileManager.default.contents(atPath: file) {
            let id = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            if !id.isEmpty, id.utf8.count <= 128 { return id }
        }
        try? FileManager.default.createDirectory(
            atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try? Data((fallback + "\n").utf8).write(to: URL(fileURLWithPath: file), options: .atomic)
        return fallback
    }

    /// The store these options name.
    public func makeStore(logger: Logger) throws -> any HistoryStore {
        if let path = sqlitePath {
            if passwordFile != nil { throw StoreError("--store-password-file is for a PostgreSQL store") }
            return SQLiteStore(
                path: path, sizeLimit: retention.maxBytes, maxAge: retention.maxAge, logger: logger)
        }
        if url.hasPrefix("postgres://") || url.hasPrefix("postgresql://") {
            return try PostgresStore(
                url: url, connectTimeout: connectTimeout, queryTimeout: queryTimeout, passwordFile: passwordFile,
                logger: logger)
        }
        throw StoreError("--store must be sqlite, sqlite:PATH or postgres://user:password@host:port/database")
    }
}

/// Whose history one instance's retention prunes.
public enum RetentionScope: String, Sendable, CaseIterable {
    /// This instance's events and threads only.
    case instance
    /// Every instance's (one designated instance of a fleet).
    case fleet
}
