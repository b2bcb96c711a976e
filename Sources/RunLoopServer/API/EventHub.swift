import MicroHTTP
import CLinux
import Foundation
import Primitives
import RunLoopCore
import RunLoopStore

/// Fans engine events out to Server-Sent-Event clients (`GET /api/events`).
///
/// Each event is serialized once and queued on every open stream; a stream's
/// buffer is bounded, so a slow client is dropped (by `EventStream`) and never
/// slows a worker down.
///
/// Threads: `publish` on whichever thread an event happened (a worker's, the
/// control loop's); `open` on the control loop. The table of streams is one
/// `Locked`; streams are written outside it.
final class EventHub: Sendable {
    struct Client {
        var stream: EventStream
        var thread: String?
        /// While a resumed stream is replayed from the store, live events wait here.
        var held: [(name: String, text: String, id: Int64)]?
        /// A `scope=summary` stream's scope (nil: every event, as before).
        var scope: StreamScope?
        /// A summary stream owed a snapshot of every thread (just opened or resumed).
        var needsFull = false
        /// A summary stream's byte budget (bytes it may still be sent now) and when it was refilled.
        var tokens = 0.0
        var refilledAt = 0.0
        /// Inspected events skipped for the byte budget since the last snapshot.
        var skipped = 0
        /// The client's address (its streams count against `--max-event-clients-per-ip`).
        var address = ""
        /// The token the stream was opened with (nil: none): it ends when the token is rotated out.
        var credential: String?
    }

    struct Clients {
        var streams: [UInt64: Client] = [:]
        /// Open streams per client address.
        var perAddress: [String: Int] = [:]
        var nextClient: UInt64 = 0
        var dropped = 0
        /// Summary streams open: while none, nothing is marked or coalesced.
        var summaryClients = 0
        /// Threads with an event since the last snapshot (only while a summary stream is open).
        var dirty: Set<String> = []
        /// Whether a snapshot is scheduled (the timer is armed only while one is due).
        var flushArmed = false
        /// The earliest the next snapshot may go (the interval and the byte budget).
        var nextFlushAt = 0.0
        /// The last summary stream closed: the snapshots' memory is old by the next one.
        var bookStale = false
    }

    let clients = Locked(Clients())
    private let maxClients: Int
    /// Most streams one client address may hold (`--max-event-clients-per-ip`; 0: no limit).
    private let maxClientsPerAddress: Int
    let recorder = Locked<HistoryRecorder?>(nil)
    /// Where snapshots read the threads (set once by the service; nil: summary
    /// streams get no rows). Weak: the registry's event sink holds the hub.
    private final class RegistryLink: Sendable {
        weak let registry: WorkerRegistry?
        init(_ registry: WorkerRegistry?) { self.registry = registry }
    }
    private let rowSource = Locked(RegistryLink(nil))
    /// The snapshot side's memory: only the snapshot queue touches it.
    let book = Locked(SnapshotBook())
    /// Where snapshots are built and sent (one at a time).
    let snapshotQueue = DispatchQueue(label: "rl-stream", qos: .utility)
    /// Shortest time between snapshots, seconds.
    let snapshotInterval: Double
    /// Most bytes per second a summary stream is sent.
    let maxBytesPerSecond: Double
    /// The HTTP server's event-stream buffer (`HTTPServerConfiguration.sseBufferBytes`).
    let sseBufferBytes: Int

    /// The store's recorder (set once by the service): `Last-Event-ID` replays from it.
    var history: HistoryRecorder? {
        get { recorder.withLock { $0 } }
        set { recorder.withLock { $0 = newValue } }
    }

    /// The registry snapshots read (set once by the service).
    var registry: WorkerRegistry? {
        get { rowSource.withLock { $0 }.registry }
        set {
            let link = RegistryLink(newValue)
            rowSource.withLock { $0 = link }
        }
    }

    /// Live events a resumed stream may hold while its replay is read (default).
    static let defaultMaxHeld = 10_000
    /// Live events a resumed stream may hold; past it the stream is closed (the client resumes again).
    let maxHeld: Int

    init(
        maxClients: Int, maxClientsPerAddress: Int = APILimits().maxEventClientsPerAddress,
        maxHeld: Int = EventHub.defaultMaxHeld,
        snapshotMs: Int = APILimits().streamSnapshotMs,
        maxBytesPerSecond: Int = APILimits().streamMaxBytesPerSecond,
        sseBufferBytes: Int = HTTPServerConfiguration.defaultSSEBufferBytes
    ) {
        self.sseBufferBytes = sseBufferBytes
        self.maxClients = maxClients
        self.maxClientsPerAddress = maxClientsPerAddress
        self.maxHeld = maxHeld
        self.snapshotInterval = Double(max(1, snapshotMs)) / 1000
        self.maxBytesPerSecond = Double(max(1, maxBytesPerSecond))
    }

    /// Open streams now.
    var clientCount: Int { clients.withLock { $0.streams.count } }

    /// Clients dropped for reading too slowly.
    var droppedClients: Int { clients.withLock { $0.dropped } }

    /// `GET /api/events[?thread=ID]`: a new stream, starting with a `hello`
    /// event that lists `threads` (every thread now). With a store and a
    /// `Last-Event-ID` header (what a browser's EventSource sends when it
    /// reconnects), the kept events after that id follow first, then a
    /// `resumed` event, then the live ones. With `scope` (`scope=summary`),
    /// the threads come as coalesced `snapshot` events instead (the first one
    /// carries every thread) and only the scope's events flow.
    func open(_ ctx: RouteContext, scope: StreamScope? = nil, threads: [Value]) throws(RunLoopError) -> Reply {
        let filter = scope != nil ? nil : ctx.request.query["thread"].flatMap { $0.isEmpty ? nil : $0 }
        var hello: [String: Value] = ["threads": .array(threads)]
        if scope != nil {
            hello["scope"] = "summary"
            hello["snapshotMs"] = .number((snapshotInterval * 1000).rounded())
            hello["maxBytesPerSecond"] = .number(maxBytesPerSecond)
        }
        // The buffer a client may fall behind by before it is dropped: the
        // server's, plus the hello (every thread: about 0.7 MB at 1,000), or
        // for a summary stream two seconds of its byte budget (a first
        // snapshot carries every thread).
        let helloText = JSON.string(.object(hello))
        let stream = EventStream(
            bufferBytes: scope == nil
                ? sseBufferBytes + helloText.utf8.count : max(sseBufferBytes, Int(2 * maxBytesPerSecond)))
        let maxClients = self.maxClients
        let history = self.history
        let resumeFrom = ctx.request.headers["last-event-id"].flatMap { Int64($0.trimmingCharacters(in: .whitespaces)) }
        let replays = history != nil && resumeFrom != nil
        let now = Monotonic.now()
        let address = ctx.request.peer?.text ?? ""
        let credential = AuthenticationStage.presentedToken(ctx.request)
        let perAddress = maxClientsPerAddress
        let (client, arm) = try clients.withLock { c throws(RunLoopError) in
            guard c.streams.count < maxClients else {
                throw .limit(
                    .tooManyClients, "\(maxClients) event-stream clients are connected (--max-event-clients)")
            }
            guard perAddress == 0 || c.perAddress[address, default: 0] < perAddress else {
                throw .limit(
                    .tooManyClientsPerIP,
                    "\(perAddress) event streams are open from this address (--max-event-clients-per-ip)")
            }
            c.nextClient += 1
            c.perAddress[address, default: 0] += 1
            c.streams[c.nextClient] = Client(
                stream: stream, thread: filter, held: replays ? [] : nil, scope: scope, needsFull: scope != nil,
                tokens: 0, refilledAt: now, address: address, credential: credential)
            guard scope != nil else { return (c.nextClient, false) }
            c.summaryClients += 1
            // A resumed stream gets its first snapshot when its replay is done.
            return (c.nextClient, replays ? false : Self.armFlush(&c))
        }
        stream.onClose { [weak self] reason in
            self?.clients.withLock { c in
                let removed = c.streams.removeValue(forKey: client)
                if let removed {
                    let left = c.perAddress[removed.address, default: 1] - 1
                    c.perAddress[removed.address] = left > 0 ? left : nil
                }
                if removed?.scope != nil {
                    c.summaryClients -= 1
                    if c.summaryClients == 0 {
                        c.dirty.removeAll()
                        c.bookStale = true
                    }
                }
                if reason == .clientTooSlow { c.dropped += 1 }
            }
        }
        // The client's number goes in front of the members already serialized.
        stream.send(event: "hello", data: "{\"client\":\(client)," + helloText.dropFirst())
        if arm { scheduleFlush() }
        if let history, let resumeFrom {
            history.readers.async { [self] in
                replay(client, stream, after: resumeFrom, thread: filter, scope: scope, from: history)
            }
        }
        return .response(
            HTTPResponse(
                status: 200,
                headers: [
                    ("Content-Type", "text/event-stream"), ("Cache-Control", "no-store"), ("X-Accel-Buffering", "no"),
                ], stream: stream))
    }

    /// Publishes one engine event (its id from the service's sequence) to
    /// every interested client. An event no client wants is not serialized; a
    /// summary stream only marks its thread for the next snapshot.
    func publish(_ event: RunLoopEvent, id: Int64) {
        let (name, thread) = Self.name(of: event)
        // First pass: who wants it, and the thread marked for the snapshots.
        let (wanted, arm) = clients.withLock { c -> (Bool, Bool) in
            guard !c.streams.isEmpty else { return (false, false) }
            var arm = false
            // (A service-wide warning has no thread: it changes no row.)
            if c.summaryClients > 0, !thread.isEmpty, c.dirty.insert(thread).inserted {
                arm = Self.armFlush(&c)
            }
            for client in c.streams.values {
                if let scope = client.scope {
                    if scope.wants(name, thread: thread) { return (true, arm) }
                } else if client.thread == nil || client.thread == thread {
                    return (true, arm)
                }
            }
            return (false, arm)
        }
        if arm { scheduleFlush() }
        guard wanted else { return }
        let (_, _, data) = Self.describe(event)
        var stamped = data.object ?? [:]
        if stamped["at"] == nil { stamped["at"] = Timestamp.value(Date()) }
        let text = JSON.string(.object(stamped))
        let maxHeld = self.maxHeld
        let cost = Double(text.utf8.count + name.utf8.count + 32)
        let now = Monotonic.now()
        let rate = maxBytesPerSecond
        // Collected under the lock, acted on after it: a send or a close can run
        // the stream's close handlers, which take this lock (ARCHITECTURE.md, "Locks").
        let (live, overflow): ([EventStream], [EventStream]) = clients.withLock { c in
            var live: [EventStream] = []
            var overflow: [EventStream] = []
            for (key, client) in c.streams {
                if let scope = client.scope {
                    guard scope.wants(name, thread: thread) else { continue }
                } else if client.thread != nil && client.thread != thread {
                    continue
                }
                if let held = client.held {
                    if held.count >= maxHeld {
                        overflow.append(client.stream)
                    } else {
                        c.streams[key]?.held?.append((name, text, id))
                    }
                } else if client.scope != nil {
                    // Inspected events and warnings spend the stream's byte budget; past
                    // it they are skipped (a row carries its thread's warnings anyway).
                    let tokens = min(rate, client.tokens + (now - client.refilledAt) * rate)
                    c.streams[key]?.refilledAt = now
                    if tokens >= cost {
                        c.streams[key]?.tokens = tokens - cost
                        live.append(client.stream)
                    } else {
                        c.streams[key]?.tokens = tokens
                        c.streams[key]?.skipped += 1
                    }
                } else {
                    live.append(client.stream)
                }
            }
            return (live, overflow)
        }
        for stream in overflow {
            // Its replay takes too long for the events arriving: it reconnects and resumes again.
            stream.close()
        }
        for stream in live {
            stream.send(event: name, data: text, id: UInt64(id))
        }
    }

    /// Threads whose listing in the registry changed: the exited ones it
    /// forgot (the next snapshot lists them as removed) and a new one once
    /// listed (the next snapshot has its row, even if its first events were
    /// flushed before the registry had it).
    func listingChanged(_ ids: [String]) {
        let arm = clients.withLock { c -> Bool in
            guard c.summaryClients > 0 else { return false }
            c.dirty.formUnion(ids)
            return Self.armFlush(&c)
        }
        if arm { scheduleFlush() }
    }

    #if DEBUG
        /// Test-only fault: a thread named `rl-fault` takes the table's lock and never releases it.
        func holdLockForever() {
            let taken = DispatchSemaphore(value: 0)
            let thread = Thread { [clients] in
                _ = clinux_set_thread_name("rl-fault")
                clients.withLock { _ in
                    taken.signal()  // lock-ok: the debug-only stuck-lock fault holds it on purpose
                    DispatchSemaphore(value: 0).wait()
                }
            }
            thread.start()
            taken.wait()
        }
    #endif

    /// Ends every stream opened with a token other than `token` (the token
    /// was rotated out on SIGHUP: such a stream may not outlive it). Returns
    /// how many ended.
    @discardableResult
    func endStreams(notPresenting token: String) -> Int {
        let ended = clients.withLock { c in
            c.streams.values.filter { $0.credential != token }.map(\.stream)
        }
        // Closed after the lock: a close runs the stream's handlers, which take it.
        for stream in ended { stream.close() }
        return ended.count
    }

    /// Closes every stream (shutdown).
    func closeAll() {
        let all = clients.withLock { c in
            defer {
                c.streams.removeAll()
                c.perAddress.removeAll()
                c.summaryClients = 0
                c.dirty.removeAll()
                c.bookStale = true
            }
            return c.streams.values.map(\.stream)
        }
        for stream in all { stream.close() }
    }
}
