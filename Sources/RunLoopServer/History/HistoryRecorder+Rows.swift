import Foundation
import RunLoopCore
import RunLoopStore

/// Events as rows: what one queued item is in the store.
extension HistoryRecorder {
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
}
