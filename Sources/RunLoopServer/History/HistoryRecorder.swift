import CLinux
import DequeModule
import Foundation
import Logging
import Primitives
import RunLoopCore
import RunLoopStore
import Synchronization

/// Event ids: one counter for the event stream and the store, so an SSE
/// client's `Last-Event-ID` names a stored event. With a store, the first id
/// of a start is above every id an earlier start could have sent.
final class EventSequence: Sendable {
    private let last = Atomic<Int64>(0)

    /// The next id.
    func next() -> Int64 { last.wrappingAdd(1, ordering: .relaxed).newValue }

    /// The last id handed out.
    var current: Int64 { last.load(ordering: .relaxed) }

    /// Starts counting above `first - 1` (never goes back).
    func start(at first: Int64) {
        var seen = last.load(ordering: .relaxed)
        while seen < first - 1 {
            let (exchanged, original) = last.compareExchange(
                expected: seen, desired: first - 1, ordering: .relaxed)
            if exchanged { return }
            seen = original
        }
    }
}

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
    /// The writer commits at most this often (seconds).
    public var flushInterval = 0.1
    /// How often this instance says it is alive (seconds).
    public var heartbeatInterval = 5.0
    /// How often the retention runs (seconds).
    public var retentionInterval = 60.0
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
            return SQLiteStore(path: path, sizeLimit: retention.maxBytes)
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

/// Keeps events in the store without making anyone wait: `record` appends to
/// a bounded queue (one lock, no I/O); one writer thread turns the queue into
/// rows and commits them in batches, at most every `flushInterval`. A full
/// queue drops the oldest event and counts it. A failing store raises the
/// `store_unavailable` warning; the writer keeps the batch and tries again
/// (with back-off) until the store answers, then resolves the warning.
final class HistoryRecorder: Sendable {
    /// Something to keep, as it was when it happened.
    enum Item: Sendable {
        case event(RunLoopEvent)
        /// An answered state-changing request (the journal).
        case request(method: String, path: String, status: Int, requestId: String, body: [UInt8], answer: [UInt8])
        /// This instance started or stopped.
        case instance(change: String, details: [String: Value])
    }

    struct Queued: Sendable {
        var seq: Int64
        var at: Double
        var item: Item
    }

    /// What `/api/store` and the metrics show.
    struct Status: Sendable {
        var up = false
        var lastError: String?
        var queued = 0
        var dropped = 0
        var written = 0
        var batches = 0
        var lastCommitAt: Double?
        var lastCommitSeconds = 0.0
        var pruned = 0
        var boot: Int64 = 0
        var registered = false
        /// This process's latest outage of the store (seconds since 1970):
        /// when it began failing, and when it answered again (nil while it
        /// fails). Nil when it never failed. Fleet health does not count the
        /// other instances' silence during it.
        var outage: (from: Double, to: Double?)?
    }

    private struct State {
        var queue = Deque<Queued>()
        /// Taken by the writer, not yet committed (for a resumed stream).
        var inFlight = Deque<Queued>()
        var status = Status()
        var stopping = false
        var flushWanted = false
        var stopped = false
        /// The writer runs (set by `start`).
        var writing = false
        /// The writer has marked the stop (when everything was written) and
        /// closed the store: the last thing it does.
        var closed = false
        /// This process as the store sees it (set by `start`, once the port is bound).
        var instance = InstanceRecord(
            id: "", url: "", version: "", host: "", pid: 0, startedAt: 0, heartbeatAt: 0)
    }

    let store: any HistoryStore
    let options: StoreOptions
    let sequence: EventSequence
    /// Reads (history pages, resumed streams) run here, never on the control loop.
    let readers = DispatchQueue(label: "runloopd.history-readers")
    private let state = Locked(State())
    private let logger: Logger
    private let warnings: WarningTable
    /// The ids this process may hand out beyond the last committed heartbeat:
    /// the next start begins above them (every event takes an id, live-only
    /// ones too, and a failing store commits no heartbeat for a while).
    static let seqReserve: Int64 = 10_000_000

    init(
        store: any HistoryStore, options: StoreOptions, sequence: EventSequence, warnings: WarningTable, logger: Logger
    ) {
        self.store = store
        self.options = options
        self.sequence = sequence
        self.warnings = warnings
        self.logger = logger
    }

    /// Whether `event` is kept: lifecycle, exits, performs, mode changes,
    /// tasks, warnings and stalls; not timer or source fires, observer
    /// activities or turns (those are many per second, and live only).
    static func keeps(_ event: RunLoopEvent) -> Bool {
        switch event {
        case .thread, .runExit, .perform, .itemMode, .task, .warning, .stall, .stallEnded: true
        case .timer, .source, .activity, .turn: false
        }
    }

    /// Queues one item (any thread; one lock, never I/O).
    func record(_ item: Item, seq: Int64, at: Double = Date().timeIntervalSince1970) {
        let capacity = options.queueCapacity
        let first = state.withLock { s -> Bool in
            guard !s.stopped else { return false }
            if s.queue.count >= capacity {
                s.queue.removeFirst()
                s.status.dropped += 1
            }
            s.queue.append(Queued(seq: seq, at: at, item: item))
            return s.queue.count == 1
        }
        // The writer sleeps until the queue stops being empty: one wake-up per batch.
        if first { state.notifyAll() }
    }

    /// Opens the store and registers this start (called once, before serving).
    /// On failure the writer keeps trying; ids then start from the clock.
    func start(instance: InstanceRecord) {
        state.withLock {
            $0.instance = instance
            $0.writing = true
        }
        store.identify(instance: instance.id)
        register(atStart: true)
        let thread = Thread { [self] in
            // Below the loops and the HTTP thread: when the CPUs are saturated,
            // the queue absorbs the difference (and, full, drops the oldest)
            // rather than the loops waiting for the store.
            setpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(clinux_gettid()), Self.writerNice)
            _ = clinux_set_thread_name("rl-store")
            writerLoop()
        }
        thread.start()
    }

    /// This process as the store sees it.
    var instance: InstanceRecord { state.withLock { $0.instance } }

    /// Registers this start; false (and the warning raised) when the store fails.
    @discardableResult
    private func register(atStart: Bool = false) -> Bool {
        let instance = self.instance
        do {
            try store.open()
            let registration = try store.register(instance)
            sequence.start(at: registration.firstSeq)
            let lost = registration.lostThreads.map { "\($0.thread) (boot \($0.boot))" }
            state.withLock {
                $0.status.boot = registration.boot
                $0.status.registered = true
            }
            recovered()
            var details: [String: Value] = [
                "boot": .number(Double(registration.boot)), "version": .string(instance.version),
                "url": .string(instance.url), "lostThreads": .array(lost.map(Value.string)),
            ]
            if let previous = registration.previous {
                details["previousBoot"] = .number(Double(previous.boot))
                details["previousEnd"] = .string(previous.stoppedAt == nil ? "lost" : "stopped")
            }
            record(.instance(change: "started", details: details), seq: sequence.next())
            logger.info(
                "history store open",
                metadata: [
                    "store": "\(store.kind)", "location": "\(store.location)",
                    "boot": .stringConvertible(registration.boot),
                    "lostThreads": .stringConvertible(lost.count),
                ])
            if !lost.isEmpty {
                logger.warning(
                    "history store: \(lost.count) thread(s) lost by a previous boot that did not stop cleanly",
                    metadata: ["lostThreads": .array(lost.map { .string($0) })])
            }
            return true
        } catch {
            if atStart {
                // The store cannot say where the last start stopped: ids go above
                // any it can have reached (ids are counts, far below this), before
                // the warning below takes one.
                sequence.start(at: Int64(Date().timeIntervalSince1970 * 1000) * 1000)
            }
            failed(error)
            return false
        }
    }

    // Only the writer thread calls `failed` and `recovered`. Each changes the
    // warning before the status, so whoever sees `/api/store` down (or up again)
    // already finds the warning raised (or resolved).

    private func failed(_ error: any Error) {
        let message = "\(error)"
        let first = state.withLock { $0.status.up || $0.status.lastError == nil }
        if first {
            logger.warning("history store failing", metadata: ["store": "\(store.kind)", "error": "\(message)"])
        }
        warnings.raise(
            "store_unavailable", severity: "warning", thread: "", subjects: [store.kind],
            message:
                "the \(store.kind) history store fails (\(message)); events are queued (up to \(options.queueCapacity)) and written when it answers again",
            details: ["store": .string(store.kind), "location": .string(store.location), "error": .string(message)],
            counts: first)
        state.withLock { s in
            if s.status.up || s.status.lastError == nil { s.status.outage = (Date().timeIntervalSince1970, nil) }
            s.status.up = false
            s.status.lastError = message
        }
    }

    private func recovered() {
        let was = state.withLock { $0.status.lastError != nil }
        if was {
            logger.info("history store answers again", metadata: ["store": "\(store.kind)"])
            warnings.resolve("store_unavailable", thread: "")
        }
        state.withLock { s in
            if s.status.lastError != nil, let from = s.status.outage?.from {
                s.status.outage = (from, Date().timeIntervalSince1970)
            }
            s.status.up = true
            s.status.lastError = nil
        }
    }

    /// The writer: sleeps until something is queued (or the heartbeat, the
    /// retention or a retry is due), waits out the rest of `flushInterval`
    /// since the last commit, commits what is queued in one transaction,
    /// repeats. A failed batch goes back to the front and the writer backs off.
    private func writerLoop() {
        var lastCommit = -Double.infinity
        var lastBeat = Monotonic.now()
        var lastPrune = Monotonic.now()
        var backoff = 0.0
        // Heartbeats matter to a fleet (PostgreSQL: others judge this instance by
        // them). An idle SQLite runloopd wakes for nothing: its heartbeat and its
        // retention ride on the commits of events.
        let beats = store.kind != "sqlite"
        while true {
            let due =
                beats ? min(lastBeat + options.heartbeatInterval, lastPrune + options.retentionInterval) : .infinity
            let sleep = backoff > 0 ? backoff : max(0, due - Monotonic.now())
            state.withLock(
                when: { $0.stopping || $0.flushWanted || (backoff == 0 && !$0.queue.isEmpty) }, timeout: sleep
            ) { _, _ in }
            // One commit per flushInterval at most: later events join this batch.
            let early = lastCommit + options.flushInterval - Monotonic.now()
            if early > 0 { state.withLock(when: { $0.stopping || $0.flushWanted }, timeout: early) { _, _ in } }
            // The whole queue changes hands in O(1): the recording threads
            // never wait behind a copy (a transaction holds up to --store-queue events).
            let (taken, stopping) = state.withLock { s -> (Deque<Queued>, Bool) in
                s.flushWanted = false
                s.inFlight = s.queue
                s.queue = Deque()
                return (s.inFlight, s.stopping)
            }
            let items = Array(taken)
            var ok = state.withLock { $0.status.registered } || register()
            if ok && (!items.isEmpty || (beats && Monotonic.now() - lastBeat >= options.heartbeatInterval)) {
                let started = Monotonic.now()
                do {
                    try store.write(batch(items))
                    let seconds = Monotonic.now() - started
                    lastBeat = Monotonic.now()
                    state.withLock { s in
                        s.inFlight = []
                        s.status.written += items.count
                        s.status.batches += items.isEmpty ? 0 : 1
                        s.status.lastCommitAt = Date().timeIntervalSince1970
                        s.status.lastCommitSeconds = seconds
                    }
                    state.notifyAll()
                    recovered()
                } catch {
                    ok = false
                    failed(error)
                }
            }
            if !ok {
                requeue(items)
                if stopping { break }
                backoff = min(max(backoff * 2, 0.25), Self.longestBackoff)
                continue
            }
            backoff = 0
            if !items.isEmpty { lastCommit = Monotonic.now() }
            // By the clock, and (SQLite) whenever the file and its WAL pass
            // the size bound's trigger: a stat after each commit.
            if Monotonic.now() - lastPrune >= options.retentionInterval
                || (!items.isEmpty && store.overLimit(options.retention))
            {
                lastPrune = Monotonic.now()
                prune()
            }
            if stopping && state.withLock({ $0.queue.isEmpty }) { break }
        }
        let everything = state.withLock { s in
            defer {
                s.stopped = true
                s.inFlight = []
            }
            return s.queue.isEmpty && s.inFlight.isEmpty
        }
        state.notifyAll()
        // The store's last work happens here, on the writer, like all of it: a
        // slow disk or an unreachable server holds this thread, never the stop.
        if everything {
            try? store.markStopped(instance: instance.id, at: Date().timeIntervalSince1970)
        }
        store.close()
        state.withLock { $0.closed = true }
        state.notifyAll()
    }

    /// The writer's longest wait between two tries of a failing store (seconds):
    /// another instance may take this long to write again after the store
    /// comes back (fleet health allows for it).
    static let longestBackoff = 5.0

    /// The writer thread's nice value (higher: less CPU when the CPUs are busy).
    static let writerNice: Int32 = 5

    /// Puts an uncommitted batch back at the front (the queue's bound still holds: the oldest go first).
    private func requeue(_ items: [Queued]) {
        guard !items.isEmpty else { return }
        let capacity = options.queueCapacity
        state.withLock { s in
            s.inFlight = []
            s.queue.insert(contentsOf: items, at: 0)
            let excess = s.queue.count - capacity
            if excess > 0 {
                s.queue.removeFirst(excess)
                s.status.dropped += excess
            }
        }
    }

    /// The retention as this instance applies it (its scope filled in).
    var retention: Retention {
        var retention = options.retention
        retention.instance = options.retentionScope == .instance ? instance.id : nil
        return retention
    }

    /// What the prunes since the last warning line deleted (the writer's thread only).
    private let unlogged = Locked((prunes: 0, events: 0, lastLine: -Double.infinity))

    /// Applies the retention now (the writer's thread). A prune that deleted
    /// something is counted, and logged at warning (history is gone): at
    /// once, unless a warning line was written within `retentionInterval`
    /// (SQLite prunes after any commit past the limit's trigger, several
    /// times a second under load); then at debug, and the next warning line
    /// carries the prunes and events since the previous one.
    private func prune() {
        let retention = self.retention
        do {
            let started = Monotonic.now()
            let removed = try store.prune(retention, now: Date().timeIntervalSince1970)
            guard removed > 0 else { return }
            let seconds = Monotonic.now() - started
            let total = state.withLock { s in
                s.status.pruned += removed
                return s.status.pruned
            }
            let interval = options.retentionInterval
            let (line, prunes, events) = unlogged.withLock { u in
                u.prunes += 1
                u.events += removed
                let due = Monotonic.now() - u.lastLine >= interval
                defer {
                    if due {
                        u = (0, 0, Monotonic.now())
                    }
                }
                return (due, u.prunes, u.events)
            }
            var metadata: Logger.Metadata = [
                "events": .stringConvertible(removed), "prunedTotal": .stringConvertible(total),
                "scope": "\(options.retentionScope.rawValue)",
                "store": "\(store.kind)", "seconds": .stringConvertible(Rep.rounded3(seconds)),
            ]
            if let maxAge = retention.maxAge { metadata["retentionSeconds"] = .stringConvertible(Rep.rounded3(maxAge)) }
            if let maxBytes = retention.maxBytes { metadata["retentionBytes"] = .stringConvertible(maxBytes) }
            if let sqlite = store as? SQLiteStore { metadata["fileBytes"] = .stringConvertible(sqlite.fileBytes()) }
            if line {
                metadata["prunesSinceLastLine"] = .stringConvertible(prunes)
                metadata["eventsSinceLastLine"] = .stringConvertible(events)
                logger.warning("history pruned", metadata: metadata)
            } else {
                logger.debug("history pruned", metadata: metadata)
            }
        } catch {
            failed(error)
        }
    }

    /// Rows for a batch (serialized here, on the writer's thread).
    private func batch(_ items: [Queued]) -> StoreBatch {
        let (boot, instance) = state.withLock { ($0.status.boot, $0.instance) }
        var batch = StoreBatch(
            heartbeat: (instance.id, Date().timeIntervalSince1970, sequence.current + Self.seqReserve))
        for queued in items {
            let (event, thread) = Self.stored(queued, instance: instance.id, boot: boot)
            batch.events.append(event)
            if let thread { batch.threads.append(thread) }
        }
        return batch
    }

    /// The stored event (and the thread row it changes) for one queued item.
    /// The text is assembled as bytes: the event's own JSON with `at` (and
    /// `thread`) put in front, a request's answer spliced in as it was sent
    /// (this runs for every kept event, on the writer's thread).
    static func stored(_ queued: Queued, instance: String, boot: Int64) -> (StoredEvent, StoredThread?) {
        let at = queued.at
        var row: StoredThread?
        var head: [(String, String)] = []  // key, JSON text, put before the payload's own keys
        let type: String
        let thread: String?
        var body: [UInt8]
        switch queued.item {
        case .event(let event):
            let (name, id, data) = EventHub.describe(event)
            (type, thread) = (name, id.isEmpty ? nil : id)
            let object = data.object ?? [:]
            if object["at"] == nil {
                head.append(("at", JSON.quoted(Timestamp.string(Date(timeIntervalSince1970: at)))))
            }
            if let thread, object["thread"] == nil { head.append(("thread", JSON.quoted(thread))) }
            body = JSON.serialize(data)
            switch event {
            case .thread(let snapshot, let change) where change == .created:
                row = StoredThread(
                    instance: instance, boot: boot, thread: snapshot.id, name: snapshot.name,
                    style: snapshot.policy.style.rawValue, createdAt: at)
            case .thread(let snapshot, let change) where change == .exited:
                row = StoredThread(
                    instance: instance, boot: boot, thread: snapshot.id, endedAt: at,
                    endedHow: snapshot.endOrigin?.code ?? snapshot.lastExit?.cause?.code ?? "ended",
                    lastExit: snapshot.lastExit.map { JSON.string(Rep.exit($0)) },
                    final: JSON.string(Rep.thread(snapshot)))
            case .runExit(let id, let exit):
                row = StoredThread(instance: instance, boot: boot, thread: id, lastExit: JSON.string(Rep.exit(exit)))
            default: break
            }
        case .request(let method, let path, let status, let requestId, let requestBody, let answer):
            (type, thread) = ("request", Self.threadOf(path))
            head = [
                ("at", JSON.quoted(Timestamp.string(Date(timeIntervalSince1970: at)))), ("method", JSON.quoted(method)),
                ("path", JSON.quoted(path)), ("status", String(status)), ("requestId", JSON.quoted(requestId)),
            ]
            if let thread { head.append(("thread", JSON.quoted(thread))) }
            // The body as JSON when it is JSON, else as a string: an accepted
            // body was read as JSON by its route; a refused one is checked.
            if !requestBody.isEmpty {
                let valid = status < 300 || (try? JSONReader.parse(requestBody)) != nil
                head.append(
                    (
                        "body",
                        valid
                            ? String(decoding: requestBody, as: UTF8.self)
                            : JSON.quoted(String(decoding: requestBody, as: UTF8.self))
                    ))
            }
            // runloopd's own answers are JSON documents: spliced as they were sent.
            if let first = answer.first, first == UInt8(ascii: "{") || first == UInt8(ascii: "[") {
                head.append(("answer", String(decoding: answer, as: UTF8.self)))
            } else if !answer.isEmpty {
                head.append(("answer", JSON.quoted(String(decoding: answer, as: UTF8.self))))
            }
            body = Array("{}".utf8)
        case .instance(let change, let details):
            (type, thread) = ("instance", nil)
            var object = details
            object["change"] = .string(change)
            object["instance"] = .string(instance)
            object["at"] = Timestamp.value(Date(timeIntervalSince1970: at))
            body = JSON.serialize(.object(object))
        }
        if !head.isEmpty, body.first == UInt8(ascii: "{") {
            var joined: [UInt8] = [UInt8(ascii: "{")]
            joined.reserveCapacity(body.count + 64 * head.count)
            for (index, (key, value)) in head.enumerated() {
                if index > 0 { joined.append(UInt8(ascii: ",")) }
                joined.append(contentsOf: JSON.quoted(key).utf8)
                joined.append(UInt8(ascii: ":"))
                joined.append(contentsOf: value.utf8)
            }
            if body.count > 2 { joined.append(UInt8(ascii: ",")) }
            joined.append(contentsOf: body.dropFirst())
            body = joined
        }
        let event = StoredEvent(
            instance: instance, boot: boot, seq: queued.seq, at: at, type: type, thread: thread,
            data: String(decoding: body, as: UTF8.self))
        return (event, row)
    }

    /// `t3` for `/api/threads/t3/…`.
    static func threadOf(_ path: String) -> String? {
        let prefix = "/api/threads/"
        guard path.hasPrefix(prefix) else { return nil }
        let rest = path.utf8.dropFirst(prefix.utf8.count)
        let end = rest.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") } ?? rest.endIndex
        return end == rest.startIndex ? nil : String(Substring(rest[..<end]))
    }

    /// Events queued or being written with `seq > after` (for a resumed
    /// stream: they are not in the store yet), oldest first.
    func pending(after: Int64) -> [StoredEvent] {
        let (items, boot, instance) = state.withLock { s in
            (Array(s.inFlight) + s.queue.filter { $0.seq > after }, s.status.boot, s.instance)
        }
        return items.filter { $0.seq > after }.map { Self.stored($0, instance: instance.id, boot: boot).0 }
    }

    /// The status now.
    var status: Status {
        state.withLock { s in
            var status = s.status
            status.queued = s.queue.count + s.inFlight.count
            return status
        }
    }

    /// Writes what is queued, marks a clean stop, and ends the writer; waits
    /// at most `timeout` seconds (SIGTERM and SIGINT come here). When the
    /// writer is not done by then (a slow disk, an unreachable server), the
    /// process goes on without it: what was committed stays (WAL, or
    /// PostgreSQL's transactions), and the next start records this one as
    /// not stopped cleanly.
    func stop(timeout: Double) {
        record(.instance(change: "stopped", details: [:]), seq: sequence.next())
        let writing = state.withLock { s in
            s.stopping = true
            return s.writing
        }
        state.notifyAll()
        guard writing else {
            state.withLock { $0.stopped = true }
            store.close()
            return
        }
        let closed = state.withLock(when: { $0.closed }, timeout: timeout) { _, done in done }
        let left = status.queued
        // Nothing is recorded from here on.
        state.withLock { $0.stopped = true }
        if left > 0 {
            logger.warning("history store: events not written at stop", metadata: ["events": .stringConvertible(left)])
        }
        if !closed {
            logger.warning(
                "history store: the writer did not finish within the stop's \(timeout) s; what it committed stays",
                metadata: ["store": "\(store.location)"])
        }
    }

    /// Asks the writer to commit now and waits
    /// until what was queued before is committed or `timeout` passes.
    func flush(timeout: Double) -> Bool {
        let target = sequence.current
        state.withLock { $0.flushWanted = true }
        state.notifyAll()
        return state.withLock(
            when: { s in
                s.stopped || (s.inFlight.isEmpty && (s.queue.first.map { $0.seq > target } ?? true))
            }, timeout: timeout
        ) { _, done in done }
    }
}
