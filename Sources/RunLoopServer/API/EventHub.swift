import MicroHTTP
import Foundation
import Primitives
import RunLoopCore

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
    private struct Clients {
        var streams: [UInt64: (stream: EventStream, thread: String?)] = [:]
        var nextClient: UInt64 = 0
        var sequence: UInt64 = 0
        var dropped = 0
    }

    private let clients = Locked(Clients())
    private let maxClients: Int

    init(maxClients: Int) {
        self.maxClients = maxClients
    }

    /// Open streams now.
    var clientCount: Int { clients.withLock { $0.streams.count } }

    /// Clients dropped for reading too slowly.
    var droppedClients: Int { clients.withLock { $0.dropped } }

    /// `GET /api/events[?thread=ID]`: a new stream, starting with a `hello`
    /// event that lists `threads` (every thread now).
    func open(_ ctx: RouteContext, threads: [Value]) throws(RunLoopError) -> Reply {
        let filter = ctx.request.query["thread"].flatMap { $0.isEmpty ? nil : $0 }
        let stream = EventStream()
        let maxClients = self.maxClients
        let client = try clients.withLock { c throws(RunLoopError) in
            guard c.streams.count < maxClients else {
                throw .limit(
                    "too_many_clients", "\(maxClients) event-stream clients are connected (--max-event-clients)")
            }
            c.nextClient += 1
            c.streams[c.nextClient] = (stream, filter)
            return c.nextClient
        }
        stream.onClose { [weak self] reason in
            self?.clients.withLock { c in
                c.streams[client] = nil
                if reason == .clientTooSlow { c.dropped += 1 }
            }
        }
        stream.send(
            event: "hello", data: JSON.string(["threads": .array(threads), "client": .number(Double(client))]))
        return .response(
            HTTPResponse(
                status: 200,
                headers: [
                    ("Content-Type", "text/event-stream"), ("Cache-Control", "no-store"), ("X-Accel-Buffering", "no"),
                ], stream: stream))
    }

    /// Publishes one engine event to every interested client.
    func publish(_ event: RunLoopEvent) {
        let batch: (id: UInt64, targets: [(stream: EventStream, thread: String?)])? = clients.withLock { c in
            if c.streams.isEmpty { return nil }
            c.sequence += 1
            return (c.sequence, Array(c.streams.values))
        }
        guard let (id, targets) = batch else { return }
        let (name, thread, data) = Self.describe(event)
        var stamped = data.object ?? [:]
        if stamped["at"] == nil { stamped["at"] = Timestamp.value(Date()) }
        let text = JSON.string(.object(stamped))
        for target in targets where target.thread == nil || target.thread == thread {
            target.stream.send(event: name, data: text, id: id)
        }
    }

    /// Closes every stream (shutdown).
    func closeAll() {
        let all = clients.withLock { c in
            defer { c.streams.removeAll() }
            return c.streams.values.map(\.stream)
        }
        for stream in all { stream.close() }
    }

    /// The SSE event name, its thread and its JSON payload.
    static func describe(_ event: RunLoopEvent) -> (String, String, Value) {
        switch event {
        case .thread(let snapshot, let change):
            var object = Rep.thread(snapshot).object ?? [:]
            object["change"] = .string(change.rawValue)
            return (
                "thread", snapshot.id,
                ["thread": .string(snapshot.id), "change": .string(change.rawValue), "snapshot": .object(object)]
            )
        case .runExit(let thread, let exit):
            var object = Rep.exit(exit).object ?? [:]
            object["thread"] = .string(thread)
            return ("run-exit", thread, .object(object))
        case .timer(let thread, let timer, let fires, let latenessMs, let valid):
            return (
                "timer", thread,
                [
                    "thread": .string(thread), "timer": .string(timer), "fires": .number(Double(fires)),
                    "latenessMs": Rep.round3(latenessMs), "valid": .bool(valid),
                ]
            )
        case .perform(let thread, let result):
            return ("perform", thread, Rep.performResult(result))
        case .source(let thread, let source, let kind, let fired, let messages):
            return (
                "source", thread,
                [
                    "thread": .string(thread), "source": .string(source), "kind": .string(kind.rawValue),
                    "fired": .number(Double(fired)), "messages": .number(Double(messages)),
                ]
            )
        case .itemMode(let thread, let kind, let item, let mode, let change):
            return (
                "\(kind)-mode", thread,
                [
                    "thread": .string(thread), kind: .string(item), "mode": .string(mode), "change": .string(change),
                ]
            )
        case .task(let thread, let task, let change, let runs):
            return (
                "task", thread,
                [
                    "thread": .string(thread), "task": .string(task), "change": .string(change.rawValue),
                    "runs": .number(Double(runs)),
                ]
            )
        case .activity(let thread, let record):
            var object = Rep.activity(record).object ?? [:]
            object["thread"] = .string(thread)
            return ("activity", thread, .object(object))
        case .turn(let thread, let turn):
            var object = Rep.turn(turn).object ?? [:]
            object["thread"] = .string(thread)
            return ("turn", thread, .object(object))
        case .warning(let warning):
            return ("warning", warning.thread, Rep.warning(warning))
        case .stall(let stall, let change):
            return ("stall", stall.thread, Rep.stall(stall, change: change.rawValue))
        case .stallEnded(let stall):
            return ("stall-ended", stall.thread, Rep.stall(stall, change: nil))
        }
    }
}
