import CLinux
import DequeModule
import Foundation
import Logging
import Primitives
import RunLoopCore
import RunLoopStore
import Synchronization

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

    /// A queued row: made by the recording thread (`row(_:seq:at:instance:)`),
    /// so the queue holds text, not events, and the writer only binds it.
    struct Queued: Sendable {
        var seq: Int64
        var at: Double
        var type: String
        var thread: String?
        /// The event's JSON text.
        var data: String
        /// The thread row it changes (instance and boot are filled in when
        /// written); boxed, as few events change one: a queued row stays small.
        var threadRow: ThreadRow?

        /// What it holds in memory, as the queue's byte bound counts it: its
        /// text and the rest of a queued row.
        var bytes: Int { data.utf8.count + Self.overhead }
        static let overhead = 128
    }

    /// A thread row waiting in the queue.
    final class ThreadRow: Sendable {
        let row: StoredThread
        init(_ row: StoredThread) { self.row = row }
    }

    /// What `/api/store` and the metrics show.
    struct Status: Sendable {
        var up = false
        var lastError: String?
        /// The last failure when the store refused this configuration (`StoreError.configuration`): `/readyz` is 503 meanwhile.
        var refusal: String?
        var queued = 0
        var dropped = 0
        /// Bytes of the queued events (`Queued.bytes`), in flight included.
        var queuedBytes = 0
        /// Events whose stored text was cut to `--store-event-bytes`.
        var cut = 0
        /// The SQLite file and its WAL on disk (bytes); nil for PostgreSQL.
        var diskBytes: Int64?
        var written = 0
        var batches = 0
        var lastCommitAt: Double?
        var lastCommitSeconds = 0.0
        var pruned = 0
        var boot: Int64 = 0
        var registered = false
        /// This process's latest outage of the store (seconds since 1970):
        /// from when it last answered before failing (`outageStart`), to
        /// when it answered again (nil while it fails). Nil when it never
        /// failed. Fleet health does not count the other instances' silence
        /// during it.
        var outage: (from: Double, to: Double?)?
    }

    struct State {
        var queue = Deque<Queued>()
        /// The bytes of `queue` (`Queued.bytes`).
        var queueBytes = 0
        /// Taken by the writer, not yet committed (for a resumed stream).
        var inFlight = Deque<Queued>()
        var inFlightBytes = 0
        /// The buffer of the batch before last, emptied with its capacity
        /// kept: it becomes the next queue, so a recording thread appends
        /// into storage that is already there instead of growing a new
        /// queue (and copying it) every batch.
        var spare = Deque<Queued>()
        var status = Status()
        var stopping = false
        var flushWanted = false
        /// A read was answered by the store since the writer's last try
        /// (`storeAnswered`): a writer that backs off tries again now.
        var retryNow = false
        /// The writer waits for the event after a perform that ends the
        /// queue (`awaitAnswer`): the next `record` wakes it.
        var awaitingNext = false
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
    let state = Locked(State())
    /// What the prunes since the last warning line deleted (the writer's thread only).
    let unlogged = Locked((prunes: 0, events: 0, lastLine: -Double.infinity))
    let logger: Logger
    let warnings: WarningTable
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

    /// Queues one item (any thread; one lock, never I/O). Its row's text is
    /// made here, before the lock, while the event is in this thread's caches:
    /// the writer later reads a few hundred bytes per event instead of the
    /// event's objects, and nothing the event holds outlives this call.
    func record(_ item: Item, seq: Int64, at: Double = Date().timeIntervalSince1970) {
        var instance = ""
        if case .instance = item { instance = state.withLock { $0.instance.id } }
        var row = Self.row(item, seq: seq, at: at, instance: instance)
        // The stored text's cap: cut here, before the lock, with a marker.
        let cut = EventCut.cut(row.data, max: options.eventBytes)
        if let cut { row.data = cut }
        let capacity = options.queueCapacity
        let byteCapacity = options.queueBytes
        let bytes = row.bytes
        let first = state.withLock { s -> Bool in
            guard !s.stopped else { return false }
            if cut != nil { s.status.cut += 1 }
            // Bounded in events and in bytes: the oldest go first (counted).
            while let oldest = s.queue.first,
                s.queue.count >= capacity || s.queueBytes + bytes > byteCapacity
            {
                s.queue.removeFirst()
                s.queueBytes -= oldest.bytes
                s.status.dropped += 1
            }
            s.queue.append(row)
            s.queueBytes += bytes
            defer { s.awaitingNext = false }
            return s.queue.count == 1 || s.awaitingNext
        }
        // The writer sleeps until the queue stops being empty: one wake-up
        // per batch (and one when it waits for a perform's answer).
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
            // By default as the loops: the writer is cheap per event and must
            // keep up, or its queue drops. `--store-writer-nice` puts it that
            // far below the process (the loops first when the CPUs are
            // saturated; the queue then absorbs the difference, never the loops).
            if options.writerNice > 0 {
                let me = id_t(clinux_gettid())
                let which = __priority_which_t(PRIO_PROCESS.rawValue)
                setpriority(which, me, min(getpriority(which, me) + options.writerNice, 19))
            }
            _ = clinux_set_thread_name("rl-store")
            writerLoop()
        }
        thread.start()
    }

    /// This process as the store sees it.
    var instance: InstanceRecord { state.withLock { $0.instance } }

    /// Registers this start; false (and the warning raised) when the store fails.
    @discardableResult
    func register(atStart: Bool = false) -> Bool {
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
                    // The same type in every line: the threads, as the warning below names them.
                    "lostThreads": .array(lost.map { .string($0) }),
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
        var status = state.withLock { s in
            var status = s.status
            status.queued = s.queue.count + s.inFlight.count
            status.queuedBytes = s.queueBytes + s.inFlightBytes
            return status
        }
        status.diskBytes = (store as? SQLiteStore)?.fileBytes()
        return status
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
