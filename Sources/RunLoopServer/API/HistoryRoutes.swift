import Foundation
import Primitives
import RunLoopCore
import RunLoopStore

/// The history store read back: `/api/history`, `/api/history/threads`,
/// `/api/fleet`, `/api/store`. Every read runs on the recorder's reader
/// queue and answers later: the control loop never waits for the disk or the
/// network.
extension API {
    func addHistory(_ r: inout Router) {
        r.add(.get, "/api/history") { ctx throws(RunLoopError) in
            let history = try requireStore()
            let query = try Self.historyQuery(ctx, limit: history.options.replayLimit)
            read(ctx, history) { store in
                let (events, more) = Self.page(try store.events(query), limit: query.limit - 1)
                var page: [String: Value] = [
                    "events": .array(events.map(Rep.storedEvent)), "count": .number(Double(events.count)),
                    "next": more ? .string(String(events.last?.id ?? 0)) : .null,
                ]
                page["order"] = .string(query.ascending ? "asc" : "desc")
                return page
            }
            return .deferred
        }
        r.add(.get, "/api/history/threads") { ctx throws(RunLoopError) in
            let history = try requireStore()
            let instanceId = ctx.request.query["instance"].flatMap { $0.isEmpty ? nil : $0 }
            let boot = try API.integerParameter(ctx, "boot", in: 1...API.maxExactInteger).map(Int64.init)
            let limit = try Self.limitParameter(ctx, max: history.options.replayLimit, default: 200)
            let current = (history.instance.id, history.status.boot)
            let live = Set(registry.allWorkers.filter { !$0.hasExited }.map(\.id))
            let beat = history.options.heartbeatInterval
            read(ctx, history) { store in
                let threads = try store.threads(instance: instanceId, boot: boot, limit: limit)
                // Another instance that stopped answering: its unended threads are lost too.
                let now = Date().timeIntervalSince1970
                let outage = history.status.outage
                let gone = Set(
                    try store.instances().filter {
                        Rep.health($0, selfId: current.0, now: now, beat: beat, outage: outage) == "lost"
                    }.map(\.id))
                return [
                    "threads": .array(
                        threads.map { t in
                            var t = t
                            if t.endedAt == nil, gone.contains(t.instance) { t.endedHow = "lost" }
                            return Rep.storedThread(
                                t,
                                live: t.instance == current.0 && t.boot == current.1 && t.endedAt == nil
                                    && live.contains(t.thread))
                        })
                ]
            }
            return .deferred
        }
        r.add(.get, "/api/fleet") { ctx throws(RunLoopError) in
            let me = instance()
            guard let history else {
                // No store: a fleet of one.
                let only = me.map { [Rep.instance($0, selfId: $0.id, now: Date().timeIntervalSince1970, beat: 5)] }
                return .json(
                    200,
                    ["self": .string(me?.id ?? ""), "store": "none", "instances": .array(only ?? [])])
            }
            let beat = history.options.heartbeatInterval
            read(ctx, history) { store in
                let now = Date().timeIntervalSince1970
                let instances = try store.instances()
                let outage = history.status.outage
                return [
                    "self": .string(me?.id ?? ""), "store": .string(store.kind),
                    "instances": .array(
                        instances.map { Rep.instance($0, selfId: me?.id ?? "", now: now, beat: beat, outage: outage) }),
                ]
            }
            return .deferred
        }
        r.add(.delete, "/api/fleet/{id}") { ctx throws(RunLoopError) in
            let history = try requireStore()
            let id = try ctx.param("id")
            let me = history.instance.id
            let beat = history.options.heartbeatInterval
            if id == me {
                throw .conflict(.instanceRunning, "\(id) is this instance; an instance that runs cannot be forgotten")
            }
            history.readers.async {
                do {
                    // Judged as GET /api/fleet judges it.
                    let now = Date().timeIntervalSince1970
                    guard let record = try history.reading({ try $0.instances() }).first(where: { $0.id == id }) else {
                        return ctx.fail(.notFound("instance", id))
                    }
                    let health = Rep.health(record, selfId: me, now: now, beat: beat, outage: history.status.outage)
                    guard health != "up" else {
                        return ctx.fail(
                            .conflict(
                                .instanceRunning,
                                "\(id) is up (its heartbeat is fresh); only a stopped or lost instance can be forgotten"
                            ))
                    }
                    // Only if no heartbeat came after the one judged: one that beats meanwhile stays.
                    switch try history.store.forget(instance: id, silentSince: record.heartbeatAt + 1e-6) {
                    case .forgotten:
                        ctx.reply(200, ["forgotten": .string(id), "health": .string(health)])
                    case .unknown:
                        ctx.fail(.notFound("instance", id))
                    case .running:
                        ctx.fail(
                            .conflict(
                                .instanceRunning,
                                "\(id) sent a heartbeat meanwhile; only a stopped or lost instance can be forgotten"))
                    }
                } catch {
                    ctx.respond(
                        APIResponses.error(
                            status: 503, code: .storeUnavailable,
                            message: "the history store does not answer: \(error)", headers: [("Retry-After", "1")]))
                }
            }
            return .deferred
        }
        r.add(.get, "/api/store") { _ throws(RunLoopError) in
            guard let history else {
                return .json(200, ["enabled": false, "kind": "none"])
            }
            let status = history.status
            let options = history.options
            return .json(
                200,
                [
                    "enabled": true, "kind": .string(history.store.kind), "location": .string(history.store.location),
                    "up": .bool(status.up), "lastError": status.lastError.map(Value.string) ?? .null,
                    "instance": .string(history.instance.id), "boot": .number(Double(status.boot)),
                    "queued": .number(Double(status.queued)), "queueCapacity": .number(Double(options.queueCapacity)),
                    "queuedBytes": .number(Double(status.queuedBytes)),
                    "queueBytesCapacity": .number(Double(options.queueBytes)),
                    "eventBytesMax": .number(Double(options.eventBytes)), "cut": .number(Double(status.cut)),
                    "diskBytes": status.diskBytes.map { .number(Double($0)) } ?? .null,
                    "dropped": .number(Double(status.dropped)), "written": .number(Double(status.written)),
                    "batches": .number(Double(status.batches)), "pruned": .number(Double(status.pruned)),
                    "lastCommitAt": status.lastCommitAt.map { Timestamp.value(Date(timeIntervalSince1970: $0)) }
                        ?? .null,
                    "lastCommitMs": Rep.round3(status.lastCommitSeconds * 1000),
                    "flushIntervalMs": Rep.round3(options.flushInterval * 1000),
                    "retention": [
                        "maxAgeSeconds": options.retention.maxAge.map { .number($0) } ?? .null,
                        "maxBytes": options.retention.maxBytes.map { .number(Double($0)) } ?? .null,
                        "scope": .string(options.retentionScope.rawValue),
                    ],
                ])
        }
    }

    private func requireStore() throws(RunLoopError) -> HistoryRecorder {
        guard let history else {
            throw RunLoopError(
                kind: .notFound, code: .storeDisabled,
                message: "runloopd runs without a history store (--no-store); nothing is kept")
        }
        return history
    }

    /// Runs `body` on the reader queue and answers with its object, or 503
    /// `store_unavailable` when the store fails.
    private func read(
        _ ctx: RouteContext, _ history: HistoryRecorder,
        _ body: @escaping @Sendable (any HistoryStore) throws -> [String: Value]
    ) {
        history.readers.async {
            do {
                ctx.reply(200, .object(try history.reading(body)))
            } catch {
                ctx.respond(
                    APIResponses.error(
                        status: 503, code: .storeUnavailable, message: "the history store does not answer: \(error)",
                        headers: [("Retry-After", "1")]))
            }
        }
    }

    /// `limit` in 1...max (`value`, at most `max`, when absent).
    static func limitParameter(_ ctx: RouteContext, max: Int, default value: Int) throws(RunLoopError) -> Int {
        try API.integerParameter(ctx, "limit", in: 1...max) ?? min(value, max)
    }

    /// The filters of `/api/history`; a page asks for one more event than
    /// `limit` to know whether another page follows.
    static func historyQuery(_ ctx: RouteContext, limit maxLimit: Int) throws(RunLoopError) -> HistoryQuery {
        let q = ctx.request.query
        var query = HistoryQuery()
        query.instance = q["instance"].flatMap { $0.isEmpty ? nil : $0 }
        query.thread = q["thread"].flatMap { $0.isEmpty ? nil : $0 }
        if let types = q["type"] {
            query.types = types.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter {
                !$0.isEmpty
            }
            if query.types.isEmpty {
                throw .badValue("type", "type must name at least one event type (or be left out for every type)")
            }
            for type in query.types where !Self.historyTypes.contains(type) {
                throw .badValue(
                    "type", "unknown event type \(type); kept types: \(Self.historyTypes.joined(separator: ", "))")
            }
        }
        query.since = try q["since"].map { text throws(RunLoopError) in try timeParameter("since", text) }
        query.until = try q["until"].map { text throws(RunLoopError) in try timeParameter("until", text) }
        if let text = q["cursor"] {
            guard let cursor = Int64(text), cursor >= 0 else {
                throw .badValue("cursor", "cursor must be the `next` value of a previous page")
            }
            query.cursor = cursor
        }
        switch q["order"] ?? "desc" {
        case "desc": query.ascending = false
        case "asc": query.ascending = true
        default: throw .badValue("order", "order must be asc (oldest first) or desc (newest first)")
        }
        query.limit = try limitParameter(ctx, max: min(1000, maxLimit), default: 100) + 1
        return query
    }

    /// A page of `limit` events from those of the `limit` + 1 rows read
    /// (fewer only at the end), and whether more follow. Whole rows only: a
    /// perform and the request kept in its row share a cursor, so a page
    /// never ends between them; a row that starts within the limit is given
    /// whole, so a page holds `limit` events, or one more when its last is
    /// such a pair (docs/history.md).
    static func page(_ events: [StoredEvent], limit: Int) -> ([StoredEvent], Bool) {
        var end = 0
        while end < events.count, end < limit {
            var next = end + 1
            while next < events.count, events[next].id == events[end].id { next += 1 }
            end = next
        }
        return (Array(events[..<end]), end < events.count)
    }

    /// The event types the store keeps.
    static let historyTypes = [
        "thread", "run-exit", "perform", "source-mode", "timer-mode", "task", "warning", "stall", "stall-ended",
        "request", "instance",
    ]

    /// A time: ISO 8601 (`2026-11-25T14:00:00Z`), seconds since 1970, or a
    /// duration ago (`90s`, `15m`, `2h`, `7d`).
    static func timeParameter(_ name: String, _ text: String) throws(RunLoopError) -> Double {
        if let seconds = Double(text), seconds.isFinite, seconds >= 0 { return seconds }
        if let last = text.last, last.isLetter, let ago = parseDuration(text) {
            return Date().timeIntervalSince1970 - ago
        }
        if let date = Timestamp.parse(text) { return date.timeIntervalSince1970 }
        throw .badValue(name, "\(name) must be an ISO 8601 time, seconds since 1970, or a duration ago such as 15m")
    }
}

extension Rep {
    /// A kept event, as `/api/history` lists it: the stream's event with its
    /// store cursor, instance and start.
    static func storedEvent(_ e: StoredEvent) -> Value {
        [
            "cursor": .string(String(e.id)), "id": .number(Double(e.seq)), "instance": .string(e.instance),
            "boot": .number(Double(e.boot)), "event": .string(e.type), "thread": e.thread.map(Value.string) ?? .null,
            "at": Timestamp.value(Date(timeIntervalSince1970: e.at)),
            "data": (try? JSON.parse(Array(e.data.utf8))) ?? .string(e.data),
        ]
    }

    static func storedThread(_ t: StoredThread, live: Bool) -> Value {
        func json(_ text: String?) -> Value { text.flatMap { try? JSON.parse(Array($0.utf8)) } ?? .null }
        func time(_ seconds: Double?) -> Value {
            seconds.map { Timestamp.value(Date(timeIntervalSince1970: $0)) } ?? .null
        }
        return [
            "instance": .string(t.instance), "boot": .number(Double(t.boot)), "thread": .string(t.thread),
            "name": t.name.map(Value.string) ?? .null, "style": t.style.map(Value.string) ?? .null,
            "createdAt": time(t.createdAt), "endedAt": time(t.endedAt),
            "endedHow": t.endedHow.map(Value.string) ?? .null, "live": .bool(live), "lastExit": json(t.lastExit),
            "final": json(t.final),
        ]
    }

    /// An instance's health as this process judges it: `up` (this process,
    /// or one silent for at most 3 heartbeat intervals while the store
    /// answered this process), `stopped` (a clean stop), else `lost`. The
    /// time since its last heartbeat counts only while the store answered
    /// this process: the span of this process's latest outage (`outage`,
    /// from its first failure to its recovery plus the writer's longest
    /// back-off, or to now while it lasts) is taken out, so an instance still
    /// backing off after the store came back is not `lost` before it had 3
    /// intervals to beat again, and one that was already silent before the
    /// outage stays `lost` through it.
    static func health(
        _ i: InstanceRecord, selfId: String, now: Double, beat: Double, outage: (from: Double, to: Double?)?
    ) -> String {
        if i.id == selfId { return "up" }
        if i.stoppedAt != nil { return "stopped" }
        var silent = now - i.heartbeatAt
        if let outage {
            let end = outage.to.map { $0 + HistoryRecorder.longestBackoff } ?? now
            let overlap = min(now, end) - max(i.heartbeatAt, outage.from)
            if overlap > 0 { silent -= overlap }
        }
        return silent <= beat * 3 ? "up" : "lost"
    }

    /// An instance of the fleet, with its `health`.
    static func instance(
        _ i: InstanceRecord, selfId: String, now: Double, beat: Double, outage: (from: Double, to: Double?)? = nil
    ) -> Value {
        let health = health(i, selfId: selfId, now: now, beat: beat, outage: outage)
        return [
            "id": .string(i.id), "url": .string(i.url), "dashboard": .string(i.url), "version": .string(i.version),
            "host": .string(i.host), "pid": .number(Double(i.pid)), "boot": .number(Double(i.boot)),
            "startedAt": Timestamp.value(Date(timeIntervalSince1970: i.startedAt)),
            "heartbeatAt": Timestamp.value(Date(timeIntervalSince1970: i.heartbeatAt)),
            "stoppedAt": i.stoppedAt.map { Timestamp.value(Date(timeIntervalSince1970: $0)) } ?? .null,
            "health": .string(health), "self": .bool(i.id == selfId),
        ]
    }
}
