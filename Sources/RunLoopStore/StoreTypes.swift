import Foundation
import Primitives

/// One kept event: what the event stream sent, as stored. `data` is the
/// event's JSON payload (the same object an SSE client receives).
public struct StoredEvent: Sendable, Equatable {
    /// The store's row id: unique in one store, increasing in insertion order
    /// (the `cursor` of `/api/history`). 0 until stored.
    public var id: Int64
    /// The instance that recorded it.
    public var instance: String
    /// Which start of that instance (1, 2, …).
    public var boot: Int64
    /// The event id the stream used (`id:` of the SSE frame): increasing
    /// across the instance's restarts.
    public var seq: Int64
    /// Seconds since 1970.
    public var at: Double
    /// The SSE event name (`run-exit`, `warning`, `request`, …).
    public var type: String
    /// The thread it is about, if any.
    public var thread: String?
    /// The JSON payload.
    public var data: String
    /// A `request` event kept in this `perform` event's row (docs/history.md,
    /// "A perform and its request"): its payload and time; its `seq` is this
    /// one's + 1, its thread this one's. Nil for every other row, and for
    /// an event as a query returns it (the pair comes back as two events).
    public var request: String?
    public var requestAt: Double?
    /// A packed row (SQLite, docs/history.md "Packed rows"): the perform and
    /// request pairs of one thread before this one, in one row with it. The
    /// row's own columns are its last pair's; `firstId` and `firstAt` are
    /// its first pair's id and time, `more` the pairs before the last
    /// (`Pack`). Nil for every other row.
    public var firstId: Int64?
    public var firstAt: Double?
    public var more: String?

    public init(
        id: Int64 = 0, instance: String, boot: Int64, seq: Int64, at: Double, type: String, thread: String?,
        data: String, request: String? = nil, requestAt: Double? = nil, firstId: Int64? = nil,
        firstAt: Double? = nil, more: String? = nil
    ) {
        self.id = id
        self.instance = instance
        self.boot = boot
        self.seq = seq
        self.at = at
        self.type = type
        self.thread = thread
        self.data = data
        self.request = request
        self.requestAt = requestAt
        self.firstId = firstId
        self.firstAt = firstAt
        self.more = more
    }

    /// The longest a request may come after its perform (seconds) and still
    /// be kept in its row: a query's `since` and `until` find the pair by the
    /// perform's time.
    public static let foldWindow = 0.1

    /// The events of one row: itself, or a perform and the request kept with it
    /// (oldest first), each as a query returns it; a packed row's pairs
    /// before them first, each pair with its own id.
    public var unfolded: [StoredEvent] {
        guard let request else { return [self] }
        var events: [StoredEvent] = []
        if let more, let firstId {
            let earlier = Pack.pairs(more)
            events.reserveCapacity(2 * earlier.count + 2)
            for (index, pair) in earlier.enumerated() {
                let base = StoredEvent(
                    id: firstId + Int64(index), instance: instance, boot: boot, seq: pair.seq, at: pair.at,
                    type: type, thread: thread, data: pair.data, request: pair.request, requestAt: pair.requestAt)
                events += base.unfolded
            }
        }
        var perform = self
        perform.request = nil
        perform.requestAt = nil
        perform.firstId = nil
        perform.firstAt = nil
        perform.more = nil
        let answer = StoredEvent(
            id: id, instance: instance, boot: boot, seq: seq + 1, at: requestAt ?? at, type: "request",
            thread: thread, data: Self.expanded(request: request, perform: data))
        return events + [perform, answer]
    }

    /// A perform request's answer is its perform's payload without `at`
    /// (plus the newline every answer ends with), and it is the request's
    /// last key: a kept request may leave it out. The text then ends at
    /// `"answer":`, which no JSON object does (docs/history.md). Nil when
    /// the request is not so; `expanded` gives back the same bytes.
    public static func compacted(request: String, perform: String) -> String? {
        var request = request
        var perform = perform
        return request.withUTF8 { r in
            perform.withUTF8 { p -> String? in
                guard let rest = afterStamp(p) else { return nil }
                let kept = r.count - (p.count - rest) - 3  // `{`, the rest, `\n}`
                guard kept > answerKey.count, r[kept - 1] == UInt8(ascii: ":"), r[kept] == UInt8(ascii: "{"),
                    r[r.count - 2] == UInt8(ascii: "\n"), r[r.count - 1] == UInt8(ascii: "}"),
                    same(r, kept - answerKey.count, answerKey), same(r, kept + 1, p, from: rest)
                else { return nil }
                return String(decoding: r[..<kept], as: UTF8.self)
            }
        }
    }

    /// A kept request's whole text: `compacted`'s undone (any other text as it is).
    public static func expanded(request: String, perform: String) -> String {
        guard request.utf8.last == UInt8(ascii: ":") else { return request }
        var perform = perform
        let rest: String? = perform.withUTF8 { p in
            afterStamp(p).map { String(decoding: p[$0...], as: UTF8.self) }
        }
        guard let rest else { return request }
        return request + "{" + rest + "\n}"
    }

    private static let answerKey = Array(#""answer":"#.utf8)

    /// Whether `r` holds `p[from...]` at `at` (memcmp: this runs for every kept request).
    private static func same(
        _ r: UnsafeBufferPointer<UInt8>, _ at: Int, _ p: UnsafeBufferPointer<UInt8>, from: Int = 0
    ) -> Bool {
        let count = p.count - from
        guard at >= 0, at + count <= r.count, let rBase = r.baseAddress, let pBase = p.baseAddress else {
            return count == 0
        }
        return memcmp(rBase + at, pBase + from, count) == 0
    }

    private static func same(_ r: UnsafeBufferPointer<UInt8>, _ at: Int, _ p: [UInt8]) -> Bool {
        p.withUnsafeBufferPointer { same(r, at, $0) }
    }
    private static let stampKey = Array(#"{"at":""#.utf8)

    /// Where a payload's keys after its leading `"at":"…",` begin.
    private static func afterStamp(_ p: UnsafeBufferPointer<UInt8>) -> Int? {
        guard p.count > stampKey.count, p[..<stampKey.count].elementsEqual(stampKey) else { return nil }
        var i = stampKey.count
        while i < p.count, p[i] != UInt8(ascii: "\"") { i += 1 }
        guard i + 2 < p.count, p[i + 1] == UInt8(ascii: ",") else { return nil }
        return i + 2
    }
}

/// One runloopd process sharing the store (a row of `instances`).
public struct InstanceRecord: Sendable, Equatable {
    /// The instance id (`--instance-id`).
    public var id: String
    /// Where its API answers (`--advertise-url`).
    public var url: String
    /// Its version.
    public var version: String
    /// The host name it runs on.
    public var host: String
    /// Its process id.
    public var pid: Int64
    /// Which start this is (1, 2, …; counted by the store).
    public var boot: Int64
    /// When this start began (seconds since 1970).
    public var startedAt: Double
    /// The last heartbeat (seconds since 1970).
    public var heartbeatAt: Double
    /// When it stopped cleanly; nil while it runs or when it died.
    public var stoppedAt: Double?

    public init(
        id: String, url: String, version: String, host: String, pid: Int64, boot: Int64 = 0, startedAt: Double,
        heartbeatAt: Double, stoppedAt: Double? = nil
    ) {
        self.id = id
        self.url = url
        self.version = version
        self.host = host
        self.pid = pid
        self.boot = boot
        self.startedAt = startedAt
        self.heartbeatAt = heartbeatAt
        self.stoppedAt = stoppedAt
    }
}

/// A worker thread as the store remembers it (a row of `threads`).
public struct StoredThread: Sendable, Equatable {
    public var instance: String
    public var boot: Int64
    /// The thread id in that process (`t1`, …).
    public var thread: String
    public var name: String?
    public var style: String?
    public var createdAt: Double?
    /// When it ended; nil while it runs.
    public var endedAt: Double?
    /// How it ended: who ended it (`service_stopping`, `thread_ending` for
    /// `DELETE /api/threads/{id}`), else the cause code of its final exit (a
    /// run style that ends its thread), `ended`, or `lost` when its process died.
    public var endedHow: String?
    /// Its last run exit (JSON), if it ran.
    public var lastExit: String?
    /// Its snapshot when it ended (JSON: counters at exit).
    public var final: String?

    public init(
        instance: String, boot: Int64, thread: String, name: String? = nil, style: String? = nil,
        createdAt: Double? = nil, endedAt: Double? = nil, endedHow: String? = nil, lastExit: String? = nil,
        final: String? = nil
    ) {
        self.instance = instance
        self.boot = boot
        self.thread = thread
        self.name = name
        self.style = style
        self.createdAt = createdAt
        self.endedAt = endedAt
        self.endedHow = endedHow
        self.lastExit = lastExit
        self.final = final
    }
}

/// One transaction's worth of writes: events, thread rows to insert or
/// update (nil fields keep what is stored), and the heartbeat.
public struct StoreBatch: Sendable {
    public var events: [StoredEvent] = []
    public var threads: [StoredThread] = []
    /// This instance's heartbeat time and event-id ceiling (ids up to it may
    /// have been sent on the stream; the next start begins above it).
    public var heartbeat: (instance: String, at: Double, seqCeiling: Int64)?

    public init(events: [StoredEvent] = [], threads: [StoredThread] = [], heartbeat: (String, Double, Int64)? = nil) {
        self.events = events
        self.threads = threads
        self.heartbeat = heartbeat.map { (instance: $0.0, at: $0.1, seqCeiling: $0.2) }
    }
}

/// What `events(_:)` returns.
public struct HistoryQuery: Sendable, Equatable {
    public var instance: String?
    public var thread: String?
    public var types: [String] = []
    public var since: Double?
    public var until: Double?
    /// Events after this store id (ascending) or before it (descending).
    public var cursor: Int64?
    /// For a stream resumed by `Last-Event-ID`: this instance's events with a
    /// larger `seq`.
    public var afterSeq: Int64?
    public var limit: Int = 100
    /// Newest first (the default) or oldest first.
    public var ascending = false

    public init(
        instance: String? = nil, thread: String? = nil, types: [String] = [], since: Double? = nil,
        until: Double? = nil, cursor: Int64? = nil, afterSeq: Int64? = nil, limit: Int = 100, ascending: Bool = false
    ) {
        self.instance = instance
        self.thread = thread
        self.types = types
        self.since = since
        self.until = until
        self.cursor = cursor
        self.afterSeq = afterSeq
        self.limit = limit
        self.ascending = ascending
    }
}

/// What `register` learned about this instance's earlier starts.
public struct Registration: Sendable, Equatable {
    /// This start's number.
    public var boot: Int64
    /// The first event id this start may use (above every id the earlier
    /// starts could have sent).
    public var firstSeq: Int64
    /// Threads of earlier starts that never ended: now marked `lost`.
    public var lostThreads: [StoredThread]
    /// The previous start, if any.
    public var previous: InstanceRecord?

    public init(boot: Int64, firstSeq: Int64, lostThreads: [StoredThread], previous: InstanceRecord?) {
        self.boot = boot
        self.firstSeq = firstSeq
        self.lostThreads = lostThreads
        self.previous = previous
    }
}

/// How much is kept.
public struct Retention: Sendable, Equatable {
    /// Events older than this many seconds go (nil: no age limit).
    public var maxAge: Double?
    /// The oldest events go while the store is larger (bytes; nil: no limit).
    public var maxBytes: Int64?
    /// Whose events go: this instance's only (`--retention-scope instance`,
    /// the default), or every instance's when nil (`--retention-scope fleet`).
    public var instance: String?

    public init(maxAge: Double?, maxBytes: Int64?, instance: String? = nil) {
        self.maxAge = maxAge
        self.maxBytes = maxBytes
        self.instance = instance
    }
}

/// A store failure, with a sentence for the warning and the logs.
public struct StoreError: Error, CustomStringConvertible, Sendable {
    public var description: String
    /// The store answered and refused this instance's configuration (TLS,
    /// the password, a missing database, a file from a newer runloopd):
    /// retrying as it is cannot help, so the instance reports not ready
    /// until the store answers (a rotated password or certificate).
    public var configuration: Bool
    public init(_ description: String, configuration: Bool = false) {
        self.description = description
        self.configuration = configuration
    }
}

/// Parses `7d`, `12h`, `30m`, `45s` or plain seconds.
public func parseDuration(_ text: String) -> Double? {
    let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86400), ("w", 604800)]
    let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
    for (suffix, factor) in units where trimmed.hasSuffix(suffix) {
        let number = trimmed.dropLast(suffix.count)
        if suffix == "s", number.hasSuffix("m") { continue }
        if let value = Double(number), value >= 0, value.isFinite { return value * factor }
        return nil
    }
    if let value = Double(trimmed), value >= 0, value.isFinite { return value }
    return nil
}

/// Parses `256MB`, `1GB`, `512KB`, `1.5GiB` or plain bytes.
public func parseByteSize(_ text: String) -> Int64? {
    let units: [(String, Double)] = [
        ("kib", 1024), ("mib", 1_048_576), ("gib", 1_073_741_824), ("kb", 1000), ("mb", 1_000_000),
        ("gb", 1_000_000_000), ("k", 1024), ("m", 1_048_576), ("g", 1_073_741_824), ("b", 1),
    ]
    let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
    for (suffix, factor) in units where trimmed.hasSuffix(suffix) {
        if let value = Double(trimmed.dropLast(suffix.count).trimmingCharacters(in: .whitespaces)), value >= 0,
            value * factor < 9e18
        {
            return Int64(value * factor)
        }
        return nil
    }
    if let value = Int64(trimmed), value >= 0 { return value }
    return nil
}
