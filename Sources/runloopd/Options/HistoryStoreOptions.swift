import ArgumentParser
import Foundation
import Logging
import RunLoopServer
import RunLoopStore

/// The history store (docs/history.md): where it is, what it keeps, how it writes.
struct HistoryStoreOptions: ParsableArguments {
    @Flag(
        help:
            "Keep nothing on disk: no history store (history, fleet and Last-Event-ID resume are off; env RUNLOOPD_NO_STORE=1)."
    )
    var noStore = false

    @Option(
        help: ArgumentHelp(
            "Where history is kept: sqlite (history.sqlite in --data-dir), sqlite:PATH, or postgres://user:password@host:port/database for a fleet.",
            valueName: "url"))
    var store = Setting(StoreURL.sqlite, env: "STORE")

    @Option(help: "Folder of the SQLite history store ($XDG_STATE_HOME/runloopd, else ~/.local/state/runloopd).")
    var dataDir = Setting(StoreOptions.defaultDataDirectory(), env: "DATA_DIR")

    @Option(help: "Keep history this long (e.g. 7d, 12h, 30m; 0: no age limit).")
    var retention = Setting(Seconds(StoreOptions().retention.maxAge ?? 0), env: "RETENTION")

    @Option(help: "Keep at most this much history (e.g. 256MB, 1GB; 0: no size limit); the oldest goes first.")
    var retentionSize = Setting(ByteSize(StoreOptions().retention.maxBytes ?? 0), env: "RETENTION_SIZE")

    @Option(
        help: ArgumentHelp(
            "Whose history the retention prunes: instance (this instance's only) or fleet (every instance's; for one designated instance of a fleet).",
            valueName: "instance|fleet"))
    var retentionScope = Setting(RetentionScope.instance, env: "RETENTION_SCOPE")

    @Option(
        help: ArgumentHelp(
            "A file holding the PostgreSQL password (its first line; read at each connection), instead of a password in --store.",
            valueName: "path"))
    var storePasswordFile = Setting("", env: "STORE_PASSWORD_FILE")

    @Option(
        help: "Events waiting for the store's writer; a full queue drops the oldest (runloopd_store_dropped_total).")
    var storeQueue = Setting(Count(StoreOptions().queueCapacity), env: "STORE_QUEUE")

    @Option(
        help:
            "Bytes of event text waiting for the store's writer (e.g. 16MB); past it the oldest queued events are dropped (runloopd_store_dropped_total)."
    )
    var storeQueueBytes = Setting(ByteSize(Int64(StoreOptions().queueBytes)), env: "STORE_QUEUE_BYTES")

    @Option(
        help:
            "Most bytes of one event's stored text (1024 at least); a longer one is kept cut, its largest members replaced by a marker (runloopd_store_cut_total)."
    )
    var storeEventBytes = Setting(ByteSize(Int64(StoreOptions().eventBytes)), env: "STORE_EVENT_BYTES")

    @Option(
        help:
            "How far the store writer thread's nice value is above the process's, 0...19 (0: as the loops; higher: it yields the CPUs to the loops and the HTTP thread when they are saturated, and its queue fills sooner)."
    )
    var storeWriterNice = Setting(Count(Int(StoreOptions().writerNice)), env: "STORE_WRITER_NICE")

    @Option(help: "Time between the store writer's commits, at least (batches; 0.001 s...60 s).")
    var storeFlushInterval = Setting(Seconds(StoreOptions().flushInterval), env: "STORE_FLUSH_INTERVAL")

    @Option(help: "Time between heartbeats to the store (an instance is lost after 3 missed; 0.1 s...1h).")
    var heartbeatInterval = Setting(Seconds(StoreOptions().heartbeatInterval), env: "HEARTBEAT_INTERVAL")

    @Option(help: "Time a PostgreSQL store may take to connect or answer one statement before the batch is retried.")
    var storeTimeout = Setting(Seconds(StoreOptions().queryTimeout), env: "STORE_TIMEOUT")

    @Option(help: "Most kept events one history page or one resumed event stream (Last-Event-ID) returns.")
    var replayLimit = Setting(Count(StoreOptions().replayLimit), env: "REPLAY_LIMIT")

    @Option(help: "This instance's id in the store (none: host name and port, kept beside an SQLite file).")
    var instanceId = Setting("", env: "INSTANCE_ID")

    @Option(help: "The URL other instances link to for this one's dashboard (none: from host and port).")
    var advertiseUrl = Setting("", env: "ADVERTISE_URL")

    mutating func validate() throws {
        let environment = Environment.current
        if !noStore { noStore = try environment.toggle("NO_STORE") ?? false }
        try resolve(
            \.store, \.dataDir, \.retention, \.retentionSize, \.retentionScope, \.storePasswordFile, \.storeQueue,
            \.storeQueueBytes, \.storeEventBytes, \.storeWriterNice, \.storeFlushInterval, \.heartbeatInterval,
            \.storeTimeout, \.replayLimit, \.instanceId,
            \.advertiseUrl)
        try storeQueue.check("--store-queue", 1...10_000_000, "1...10000000")
        try storeQueueBytes.check(
            "--store-queue-bytes", ByteSize(64 * 1024)...ByteSize(1 << 40), "64KiB...1TiB (65536...1099511627776 bytes)"
        )
        try storeEventBytes.check(
            "--store-event-bytes", ByteSize(Int64(StoreOptions.smallestEventBytes))...ByteSize(Int64(Int32.max)),
            "1024...2147483647 bytes")
        try checkFloor()
        try storeWriterNice.check("--store-writer-nice", 0...19, "0...19")
        try replayLimit.check("--replay-limit", 1...1_000_000, "1...1000000")
        try storeFlushInterval.check("--store-flush-interval", Seconds(0.001)...Seconds(60), "0.001...60 seconds")
        try heartbeatInterval.check("--heartbeat-interval", Seconds(0.1)...Seconds(3600), "0.1...3600 seconds")
        try storeTimeout.check("--store-timeout", Seconds(0.1)...Seconds(600), "0.1...600 seconds")
        let file = storePasswordFile.value
        if !file.isEmpty, !FileManager.default.isReadableFile(atPath: file) {
            throw ValidationError("--store-password-file: cannot read \(file)")
        }
        let id = instanceId.value
        guard id.utf8.count <= 128, id.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7f }) else {
            throw ValidationError("--instance-id must be 1 to 128 printable ASCII characters without spaces")
        }
        let options = self.options
        if options.enabled {
            do {
                _ = try options.makeStore(logger: Logger(label: "runloopd"))
            } catch {
                throw ValidationError("\(error)")
            }
        }
    }

    /// A size bound below the floor (an empty store's measured size and
    /// room for as much again of events) would empty the history at every
    /// prune: refused, with the numbers.
    func checkFloor() throws {
        let bytes = retentionSize.bytes
        guard !noStore, bytes > 0 else { return }
        guard let (floor, empty) = StoreOptions.retentionFloor() else { return }
        guard bytes < floor else { return }
        throw ValidationError(
            refusal(
                "--retention-size",
                "0 (no size limit) or at least \(floor) bytes (\(Self.kilobytes(floor)); it is \(bytes) bytes): an empty store measures \(empty) bytes (\(Self.kilobytes(empty))), and the size prune keeps the store at 60 % of the limit, which must hold the empty store and as much again of events"
            ))
    }

    private func refusal(_ flag: String, _ rule: String) -> String { retentionSize.refusal(flag, rule) }

    private static func kilobytes(_ bytes: Int64) -> String {
        "\((bytes + 999) / 1000) KB"
    }

    /// The store's options these flags give.
    var options: StoreOptions {
        var options = StoreOptions()
        options.enabled = !noStore
        options.url = store.value.text
        options.dataDirectory = dataDir.value
        options.retention = Retention(
            maxAge: retention.seconds > 0 ? retention.seconds : nil,
            maxBytes: retentionSize.bytes > 0 ? retentionSize.bytes : nil)
        options.retentionScope = retentionScope.value
        options.passwordFile = storePasswordFile.value.isEmpty ? nil : storePasswordFile.value
        options.queueCapacity = storeQueue.count
        options.queueBytes = Int(storeQueueBytes.bytes)
        options.eventBytes = Int(storeEventBytes.bytes)
        options.writerNice = Int32(storeWriterNice.count)
        options.replayLimit = replayLimit.count
        options.queryTimeout = storeTimeout.seconds
        options.connectTimeout = min(storeTimeout.seconds, options.connectTimeout)
        options.flushInterval = storeFlushInterval.seconds
        options.heartbeatInterval = heartbeatInterval.seconds
        options.instanceId = instanceId.value.isEmpty ? nil : instanceId.value
        options.advertiseURL = advertiseUrl.value.isEmpty ? nil : advertiseUrl.value
        return options
    }
}
