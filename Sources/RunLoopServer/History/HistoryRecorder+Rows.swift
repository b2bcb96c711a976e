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
        // `"key":value` pairs (JSON text), comma-separated, put before the payload's own keys.
        var head: [UInt8] = []
        head.reserveCapacity(64)
        func key(_ name: StaticString) {
            if !head.isEmpty { head.append(UInt8(ascii: ",")) }
            head.append(UInt8(ascii: "\""))
            head.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
            head.append(contentsOf: "\":".utf8)
        }
        // `at` as a JSON string: the timestamp's text is ASCII digits and punctuation.
        func stamp(_ seconds: Double) {
            key("at")
            head.append(UInt8(ascii: "\""))
            Timestamp.append(Date(timeIntervalSince1970: seconds), to: &head)
            head.append(UInt8(ascii: "\""))
        }
        let type: String
        let thread: String?
        var body: [UInt8]
        switch queued.item {
        case .event(let event):
            let (name, id, data) = EventHub.describe(event)
            (type, thread) = (name, id.isEmpty ? nil : id)
            let object = data.object ?? [:]
            if object["at"] == nil { stamp(at) }
            if let thread, object["thread"] == nil {
                key("thread")
                head.append(contentsOf: JSON.quoted(thread).utf8)
            }
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
            stamp(at)
            key("method")
            head.append(contentsOf: JSON.quoted(method).utf8)
            key("path")
            head.append(contentsOf: JSON.quoted(path).utf8)
            key("status")
            head.append(contentsOf: String(status).utf8)
            key("requestId")
            head.append(contentsOf: JSON.quoted(requestId).utf8)
            if let thread {
                key("thread")
                head.append(contentsOf: JSON.quoted(thread).utf8)
            }
            // The body as JSON when it is JSON, else as a string: an accepted
            // body was read as JSON by its route; a refused one is checked.
            if !requestBody.isEmpty {
                let valid = status < 300 || (try? JSONReader.parse(requestBody)) != nil
                key("body")
                if valid {
                    head.append(contentsOf: requestBody)
                } else {
                    head.append(contentsOf: JSON.quoted(String(decoding: requestBody, as: UTF8.self)).utf8)
                }
            }
            // runloopd's own answers are JSON documents: spliced as they were sent.
            if let first = answer.first, first == UInt8(ascii: "{") || first == UInt8(ascii: "[") {
                key("answer")
                head.append(contentsOf: answer)
            } else if !answer.isEmpty {
                key("answer")
                head.append(contentsOf: JSON.quoted(String(decoding: answer, as: UTF8.self)).utf8)
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
        let data: String
        if !head.isEmpty, body.first == UInt8(ascii: "{") {
            // `{` head [`,`] the body after its `{`, written once into the text.
            let comma = body.count > 2 ? 1 : 0
            data = String(unsafeUninitializedCapacity: 1 + head.count + comma + body.count - 1) { out in
                out[0] = UInt8(ascii: "{")
                var end = out[1...].initialize(fromContentsOf: head)
                if comma == 1 {
                    out[end] = UInt8(ascii: ",")
                    end += 1
                }
                return out[end...].initialize(fromContentsOf: body[1...])
            }
        } else {
            data = String(decoding: body, as: UTF8.self)
        }
        let event = StoredEvent(
            instance: instance, boot: boot, seq: queued.seq, at: at, type: type, thread: thread, data: data)
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
