import Foundation
import Primitives
import RunLoopCore

/// The journal: the state-changing API requests this runloopd answered and
/// their outcomes, newest last, in a bounded ring (`--journal-size`). Recording
/// costs one lock and an append of bytes already at hand; parsing waits for an
/// export. `GET /api/journal?since=` exports it as an experiment, so a session
/// replays elsewhere (`runloopd play --diff`).
final class Journal: Sendable {
    struct Entry: Sendable {
        var seq: Int
        var at: Date
        var method: String
        var path: String
        var body: [UInt8]
        var status: Int
        var answer: [UInt8]
    }

    private struct State {
        var entries: [Entry] = []
        var head = 0
        var seq = 0
    }

    private let capacity: Int
    private let state = Locked(State())

    init(capacity: Int) { self.capacity = capacity }

    /// Records one answered request (no-op with capacity 0).
    func record(method: String, path: String, body: [UInt8], status: Int, answer: [UInt8]) {
        guard capacity > 0 else { return }
        state.withLock { s in
            s.seq += 1
            let entry = Entry(
                seq: s.seq, at: Date(), method: method, path: path, body: body, status: status, answer: answer)
            if s.entries.count < capacity {
                s.entries.append(entry)
            } else {
                s.entries[s.head] = entry
                s.head = (s.head + 1) % capacity
            }
        }
    }

    /// Entries with `seq > since`, oldest first, at most `limit`.
    func entries(since: Int, limit: Int) -> [Entry] {
        state.withLock { s in
            Array((s.entries[s.head...] + s.entries[..<s.head]).filter { $0.seq > since }.prefix(limit))
        }
    }

    /// Answer fields worth expecting on a replay: what a run-loop lesson is
    /// about, never times, counters that move with the clock, or states that
    /// depend on timing.
    static let expectedFields = ["exitReason", "kind", "role", "ok", "cancelled", "style", "repeats", "valid"]

    /// Answer fields whose string values are ids a replay must capture.
    static let idFields = ["id", "performId", "keepAliveSource", "keepAliveTimer"]

    /// The entries as an experiment: ids the answers created become captured
    /// variables, so the replay works on a server whose ids differ. A request
    /// whose path is not an API path (`/api/x/../threads`: no route has one,
    /// it was answered 404) is left out: an experiment's steps must have one.
    static func experiment(_ entries: [Entry], version: String) -> Value {
        var known: [String: String] = [:]  // id value → variable name
        var steps: [Value] = []
        for entry in entries where Experiment.apiPathProblem(entry.path) == nil {
            var (path, query) = (entry.path, "")
            if let mark = entry.path.firstIndex(of: "?") {
                path = String(entry.path[..<mark])
                query = String(entry.path[mark...])
            }
            let segments = path.split(separator: "/", omittingEmptySubsequences: false).map { segment in
                known[String(segment)].map { "${\($0)}" } ?? String(segment)
            }
            var request: [String: Value] = [
                "method": .string(entry.method), "path": .string(segments.joined(separator: "/") + query),
            ]
            if !entry.body.isEmpty, let body = try? JSON.parse(entry.body) { request["body"] = replaceIds(body, known) }
            let answer = (try? JSON.parse(entry.answer)) ?? .null
            var expectJSON: [String: Value] = [:]
            for field in expectedFields {
                if let value = answer.object?[field], value != .null { expectJSON[field] = value }
            }
            if let code = answer.object?["error"]?.object?["code"] { expectJSON["error.code"] = code }
            var capture: [String: Value] = [:]
            for field in idFields {
                guard let id = answer.object?[field]?.string, !id.isEmpty, known[id] == nil,
                    id.unicodeScalars.allSatisfy({ CharacterSet.alphanumerics.contains($0) })
                else { continue }
                known[id] = id
                capture[id] = .string(field)
            }
            var expect: [String: Value] = ["status": .number(Double(entry.status))]
            if !expectJSON.isEmpty { expect["json"] = .object(expectJSON) }
            var step: [String: Value] = [
                "say": .string("\(entry.method) \(entry.path) answered \(entry.status)"),
                "request": .object(request), "expect": .object(expect),
            ]
            if !capture.isEmpty { step["capture"] = .object(capture) }
            steps.append(.object(step))
        }
        let from = entries.first.map { Timestamp.string($0.at) } ?? ""
        return [
            "id": .string("recorded-session"), "title": "A recorded session",
            "source": [
                "article": .string("recorded by runloopd \(version)"), "url": "",
                "section": .string(entries.isEmpty ? "" : "from \(from), \(entries.count) requests"),
            ],
            "explanation":
                "The state-changing requests one runloopd answered, in order, with the status and the run-loop outcomes they got. Play it on another server with runloopd play --diff to see where the two differ.",
            "steps": .array(steps),
            "lastSeq": .number(Double(entries.last?.seq ?? 0)),
        ]
    }

    private static func replaceIds(_ value: Value, _ known: [String: String]) -> Value {
        switch value {
        case .string(let s): return .string(known[s].map { "${\($0)}" } ?? s)
        case .array(let items): return .array(items.map { replaceIds($0, known) })
        case .object(let object): return .object(object.mapValues { replaceIds($0, known) })
        default: return value
        }
    }
}

/// The experiments `--experiments-dir` holds, read once at start (the routes
/// never touch the disk).
struct ExperimentLibrary: Sendable {
    let experiments: [Experiment]
    let problems: [String]

    static func load(_ directory: String) -> ExperimentLibrary {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue
        else { return ExperimentLibrary(experiments: [], problems: []) }
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter {
            $0.hasSuffix(".json")
        }.sorted()
        var experiments: [Experiment] = []
        var problems: [String] = []
        for name in names {
            do throws(RunLoopError) {
                experiments.append(
                    contentsOf: try ExperimentFiles.load((directory as NSString).appendingPathComponent(name)).map(
                        \.experiment))
            } catch {
                problems.append(error.message)
            }
        }
        return ExperimentLibrary(experiments: experiments, problems: problems)
    }
}
