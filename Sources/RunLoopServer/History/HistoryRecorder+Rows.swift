import Foundation
import RunLoopCore
import RunLoopStore

/// Events as rows: what one recorded item is in the store.
extension HistoryRecorder {
    /// The row for one item, made on the recording thread while the event is
    /// fresh in its caches (a perform's row is a few hundred bytes written
    /// directly, in the bytes `EventHub.describe` and `JSON.serialize` would
    /// give): the queue then holds text, not the event, and the writer only
    /// binds it. The text is the event's own JSON with `at` (and `thread`)
    /// put in front; a request's answer is spliced in as it was sent.
    /// `instance`: this instance's id (only an `.instance` item uses it).
    static func row(_ item: Item, seq: Int64, at: Double, instance: String) -> Queued {
        var threadRow: StoredThread?
        // `"key":value` pairs (JSON text), comma-separated, put before the payload's own keys.
        var head: [UInt8] = []
        head.reserveCapacity(64)
        func key(_ name: StaticString) {
            if !head.isEmpty { head.append(UInt8(ascii: ",")) }
            head.append(UInt8(ascii: "\""))
            JSON.writeLiteral(name, into: &head)
            head.append(UInt8(ascii: "\""))
            head.append(UInt8(ascii: ":"))
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
        switch item {
        case .event(.perform(let id, let result)):
            // The most frequent kept event: written as is, no `Value` built.
            return Queued(
                seq: seq, at: at, type: "perform", thread: id.isEmpty ? nil : id,
                data: PerformJSON.row(result, at: at), threadRow: nil)
        case .event(let event):
            let (name, id, data) = EventHub.describe(event)
            (type, thread) = (name, id.isEmpty ? nil : id)
            let object = data.object ?? [:]
            if object["at"] == nil { stamp(at) }
            if let thread, object["thread"] == nil {
                key("thread")
                JSON.writeString(thread, into: &head)
            }
            body = JSON.serialize(data)
            switch event {
            case .thread(let snapshot, let change) where change == .created:
                threadRow = StoredThread(
                    instance: "", boot: 0, thread: snapshot.id, name: snapshot.name,
                    style: snapshot.policy.style.rawValue, createdAt: at)
            case .thread(let snapshot, let change) where change == .exited:
                threadRow = StoredThread(
                    instance: "", boot: 0, thread: snapshot.id, endedAt: at,
                    endedHow: snapshot.endOrigin?.code ?? snapshot.lastExit?.cause?.code ?? "ended",
                    lastExit: snapshot.lastExit.map { JSON.string(Rep.exit($0)) },
                    final: JSON.string(Rep.thread(snapshot)))
            case .runExit(let id, let exit):
                threadRow = StoredThread(instance: "", boot: 0, thread: id, lastExit: JSON.string(Rep.exit(exit)))
            default: break
            }
        case .request(let method, let path, let status, let requestId, let requestBody, let answer):
            (type, thread) = ("request", Self.threadOf(path))
            head.reserveCapacity(160 + requestBody.count + answer.count)
            stamp(at)
            key("method")
            JSON.writeString(method, into: &head)
            key("path")
            JSON.writeString(path, into: &head)
            key("status")
            JSON.writeNumber(Double(status), into: &head)
            key("requestId")
            JSON.writeString(requestId, into: &head)
            if let thread {
                key("thread")
                JSON.writeString(thread, into: &head)
            }
            // The body as JSON when it is JSON, else as a string: an accepted
            // body was read as JSON by its route; a refused one is checked.
            if !requestBody.isEmpty {
                let valid = status < 300 || (try? JSONReader.parse(requestBody)) != nil
                key("body")
                if valid {
                    head.append(contentsOf: requestBody)
                } else {
                    JSON.writeString(String(decoding: requestBody, as: UTF8.self), into: &head)
                }
            }
            // runloopd's own answers are JSON documents: spliced as they were sent.
            if let first = answer.first, first == UInt8(ascii: "{") || first == UInt8(ascii: "[") {
                key("answer")
                head.append(contentsOf: answer)
            } else if !answer.isEmpty {
                key("answer")
                JSON.writeString(String(decoding: answer, as: UTF8.self), into: &head)
            }
            // The whole object is the head: `{` head `}`.
            let data = String(unsafeUninitializedCapacity: head.count + 2) { out in
                out[0] = UInt8(ascii: "{")
                let end = out[1...].initialize(fromContentsOf: head)
                out[end] = UInt8(ascii: "}")
                return end + 1
            }
            return Queued(seq: seq, at: at, type: type, thread: thread, data: data, threadRow: nil)
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
        return Queued(
            seq: seq, at: at, type: type, thread: thread, data: data, threadRow: threadRow.map(ThreadRow.init))
    }

    /// The stored event (and the thread row it changes) for one queued row,
    /// as this instance's boot.
    static func stored(_ queued: Queued, instance: String, boot: Int64) -> (StoredEvent, StoredThread?) {
        let event = StoredEvent(
            instance: instance, boot: boot, seq: queued.seq, at: queued.at, type: queued.type, thread: queued.thread,
            data: queued.data)
        guard var row = queued.threadRow?.row else { return (event, nil) }
        row.instance = instance
        row.boot = boot
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
