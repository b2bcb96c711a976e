import MicroHTTP
import CLinux
import Foundation
import Primitives
import RunLoopCore
import RunLoopStore

/// A resumed stream's replay: the events a client missed, read back from
/// the history store before its live events.
extension EventHub {
    /// Sends a resumed stream what it missed: the kept events after `after`
    /// (queued ones first looked up, then the store), then what was held
    /// meanwhile (without repeats), then a `resumed` event; runs on the
    /// recorder's reader queue.
    func replay(
        _ client: UInt64, _ stream: EventStream, after: Int64, thread: String?, scope: StreamScope?,
        from history: HistoryRecorder
    ) {
        // Queued first: an event leaves the queue only once it is stored.
        let pending = history.pending(after: after)
        let limit = history.options.replayLimit
        var replayed: [StoredEvent] = []
        var failure: String?
        // What is read: the stream's thread (or all); for a scope, each inspected
        // thread's kept types it lists, and every thread's warnings.
        var queries: [(thread: String?, types: [String])] = [(thread, Self.replayedTypes)]
        if let scope {
            let types = Self.replayedTypes.filter { scope.types?.contains($0) ?? true }
            queries = scope.inspect.sorted().map { ($0, types) }.filter { !$0.types.isEmpty }
            queries.append((nil, ["warning"]))
        }
        do {
            for query in queries {
                // One more than the limit: whether the replay is cut short.
                let read = HistoryQuery(
                    instance: history.instance.id, thread: query.thread, types: query.types, afterSeq: after,
                    limit: limit + 1)
                replayed += try history.reading { try $0.events(read) }
            }
        } catch {
            failure = "\(error)"
        }
        var seen = Set<Int64>()
        replayed = replayed.filter { seen.insert($0.seq).inserted }
        for event in pending
        where !seen.contains(event.seq) && (thread == nil || event.thread == thread)
            && Self.replayedTypes.contains(event.type)
            && (scope.map { scope in scope.wants(event.type, thread: event.thread ?? "") } ?? true)
        {
            replayed.append(event)
            seen.insert(event.seq)
        }
        replayed.sort { $0.seq < $1.seq }
        let truncated = replayed.count > limit
        if truncated { replayed = Array(replayed.prefix(limit)) }
        for event in replayed {
            stream.send(event: event.type, data: event.data, id: UInt64(event.seq))
        }
        var summary: [String: Value] = [
            "lastEventId": .number(Double(after)), "replayed": .number(Double(replayed.count)),
            "truncated": .bool(truncated),
        ]
        if let failure { summary["error"] = .string(failure) }
        // What was held meanwhile, in rounds: each round takes the held events
        // under the lock and sends them after it (a send can close a slow
        // client's stream, whose close handler takes this lock). Live events
        // keep being held until a round finds nothing left, so none overtakes them.
        stream.send(event: "resumed", data: JSON.string(.object(summary)))
        while true {
            let batch: [(name: String, text: String, id: Int64)]? = clients.withLock { c in
                guard let held = c.streams[client]?.held else { return nil }
                c.streams[client]?.held = held.isEmpty ? nil : []
                return held.isEmpty ? nil : held
            }
            guard let batch else { break }
            for event in batch where !seen.contains(event.id) {
                guard stream.send(event: event.name, data: event.text, id: UInt64(event.id)) else { return }
            }
        }
        // A summary stream's first snapshot follows its replay.
        if scope != nil, clients.withLock({ c in c.streams[client] != nil ? Self.armFlush(&c) : false }) {
            scheduleFlush()
        }
    }

    /// The kept types a stream carries (requests and instance events are history only).
    static let replayedTypes = API.historyTypes.filter { $0 != "request" && $0 != "instance" }
}
