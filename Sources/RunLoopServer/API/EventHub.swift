import Foundation
import RunLoopCore

/// Fans engine events out to Server-Sent-Event clients (`GET /api/events`).
///
/// Each event is serialized once and queued on every open stream; a stream's
/// buffer is bounded, so a slow client is dropped (by `EventStream`) and never
/// slows a worker down.
final class EventHub: @unchecked Sendable {
    private let lock = NSLock()
    private var streams: [UInt64: (stream: EventStream, thread: String?)] = [:]
    private var nextClient: UInt64 = 0
    private var sequence: UInt64 = 0
    private var dropped = 0
    private let maxClients: Int
    private let threads: @Sendable () -> [Value]

    init(maxClients: Int, threads: @escaping @Sendable () -> [Value]) {
        self.maxClients = maxClients
        self.threads = threads
    }

    /// Open streams now.
    var clientCount: Int {
        lock.lock()
        defer { lock.unlock() }
        return streams.count
    }

    /// Clients dropped for reading too slowly.
    var droppedClients: Int {
        lock.lock()
        defer { lock.unlock() }
        return dropped
    }

    /// `GET /api/events[?thread=ID]`: a new stream, starting with a `hello`
    /// event that lists every thread.
    func open(_ ctx: RouteContext) throws(RunLoopError) -> Reply {
        let filter = ctx.request.query["thread"].flatMap { $0.isEmpty ? nil : $0 }
        let stream = EventStream()
        lock.lock()
        guard streams.count < maxClients else {
            lock.unlock()
            throw .limit("too_many_clients", "\(maxClients) event-stream clients are connected (--max-event-clients)")
        }
        nextClient += 1
        let client = nextClient
        streams[client] = (stream, filter)
        lock.unlock()
        stream.onClose { [weak self] reason in
            guard let self else { return }
            self.lock.lock()
            self.streams[client] = nil
            if reason == .clientTooSlow { self.dropped += 1 }
            self.lock.unlock()
        }
        stream.send(
            event: "hello", data: JSON.string(["threads": .array(threads()), "client": .number(Double(client))]))
        return .response(
            HTTPResponse(
                status: 200,
                headers: [
                    ("Content-Type", "text/event-stream"), ("Cache-Control", "no-store"), ("X-Accel-Buffering", "no"),
                ], stream: stream))
    }

    /// Publishes one engine event to every interested client.
    func publish(_ event: RunLoopEvent) {
        lock.lock()
        if streams.isEmpty {
            lock.unlock()
            return
        }
        sequence += 1
        let id = sequence
        let targets = streams.values.map { $0 }
        lock.unlock()
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
        lock.lock()
        let all = streams.values.map(\.stream)
        streams.removeAll()
        lock.unlock()
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
        }
    }
}
