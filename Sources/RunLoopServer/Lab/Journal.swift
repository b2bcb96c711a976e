import DequeModule
import Foundation
import Primitives
import RunLoopCore

/// The journal: the state-changing API requests this runloopd answered and
/// their outcomes, newest last, in a ring bounded twice: by count
/// (`--journal-size`) and by the bytes of request bodies and answers it holds
/// (`--journal-bytes`; one request larger than that is kept alone). Recording
/// costs one lock and an append of bytes already at hand; parsing waits for an
/// export. `GET /api/journal?since=` exports it as an experiment, so a session
/// replays elsewhere (`runloopd play --diff`). Each entry keeps when its
/// request arrived and when it was answered: the export orders the steps by
/// arrival, turns the gaps into waits and marks a request answered after a
/// later one arrived (a blocking run, and the stop sent while it ran) as a
/// background step, so the replay keeps the session's time and concurrency.
final class Journal: Sendable {
    struct Entry: Sendable {
        var seq: Int
        /// When the request arrived.
        var started: Date
        /// When it was answered.
        var at: Date
        var method: String
        var path: String
        var body: [UInt8]
        var status: Int
        var answer: [UInt8]

        /// What the entry counts against `--journal-bytes`.
        var bytes: Int { body.count + answer.count }
    }

    /// What the journal holds now (`/metrics`).
    struct Usage: Sendable, Equatable {
        var entries = 0
        /// Bytes of request bodies and answers held.
        var bytes = 0
        /// Entries dropped by either bound since the start.
        var dropped = 0
    }

    /// One export's page: the entries, and how many requests after `since`
    /// the journal no longer holds (dropped by its bounds before the export).
    struct Page: Sendable {
        var entries: [Entry]
        var missed: Int
    }

    private struct State {
        var entries = Deque<Entry>()
        /// Bytes of the entries held; entries dropped since the start.
        var bytes = 0
        var dropped = 0
        var seq = 0
    }

    private let capacity: Int
    /// Most bytes of request bodies and answers held (`--journal-bytes`).
    let maxBytes: Int
    /// Most bytes (request bodies and answers) one export reads (`--max-export-bytes`).
    let maxExportBytes: Int
    private let state = Locked(State())

    /// Default bytes of one export: a page parsed on the control loop in tens of milliseconds.
    static let defaultMaxExportBytes = 4_000_000
    /// Default bytes the journal holds: a thousand requests of 16 KB each,
    /// far more than a session of run-loop lessons sends; a flood of 64 KB
    /// bodies with answers as large keeps about 125 of them.
    static let defaultMaxBytes = 16_000_000

    init(capacity: Int, maxBytes: Int = Journal.defaultMaxBytes, maxExportBytes: Int = Journal.defaultMaxExportBytes) {
        self.capacity = capacity
        self.maxBytes = max(1, maxBytes)
        self.maxExportBytes = max(1, maxExportBytes)
    }

    /// Records one request that arrived at `arrivedAt` and was answered at
    /// `answeredAt` (no-op with capacity 0). The oldest entries make room:
    /// the journal never holds more than `capacity` entries, nor more than
    /// `maxBytes` unless its one entry is larger.
    func record(
        method: String, path: String, body: [UInt8], status: Int, answer: [UInt8], arrivedAt: Date = Date(),
        answeredAt: Date = Date()
    ) {
        guard capacity > 0 else { return }
        state.withLock { s in
            s.seq += 1
            let entry = Entry(
                seq: s.seq, started: arrivedAt, at: answeredAt, method: method, path: path, body: body,
                status: status, answer: answer)
            s.entries.append(entry)
            s.bytes += entry.bytes
            while s.entries.count > capacity || (s.bytes > maxBytes && s.entries.count > 1) {
                s.bytes -= s.entries.removeFirst().bytes
                s.dropped += 1
            }
        }
    }

    /// Entries with `seq > since`, oldest first, at most `limit` and at most
    /// `maxExportBytes` of bodies and answers (always at least one): an
    /// export is parsed on the control loop, so its size bounds the time it
    /// holds that loop. The rest follows with `since=` the page's `lastSeq`.
    func entries(since: Int, limit: Int) -> Page {
        let budget = maxExportBytes
        return state.withLock { s in
            var taken: [Entry] = []
            var bytes = 0
            for entry in s.entries where entry.seq > since {
                if taken.count == limit || (!taken.isEmpty && bytes + entry.bytes > budget) { break }
                taken.append(entry)
                bytes += entry.bytes
            }
            // The seqs after `since` before the oldest held: dropped.
            let oldest = s.entries.first?.seq ?? s.seq + 1
            return Page(entries: taken, missed: max(0, oldest - 1 - since))
        }
    }

    /// What the journal holds now.
    var usage: Usage { state.withLock { Usage(entries: $0.entries.count, bytes: $0.bytes, dropped: $0.dropped) } }

    /// The seq of the newest entry recorded (0: none yet): where a recording
    /// that starts now begins (`since=` of its export).
    var newestSeq: Int { state.withLock { $0.seq } }

    /// The longest wait an export writes by default (`maxWait=`): a pause
    /// longer than this is replayed as this long.
    static let defaultMaxWait = 5.0

    /// Waits shorter than this are left out: requests sent back to back.
    static let shortestWait = 0.005

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
    ///
    /// Steps are in the order the requests arrived. `wait` is the time from
    /// the previous step's arrival to this one's (at most `maxWait`, left out
    /// under 5 ms); `background` marks a request that was answered only after
    /// the next one arrived: the player sends it and goes on, and checks its
    /// answer when it comes.
    static func experiment(
        _ recorded: [Entry], version: String, maxWait: Double = defaultMaxWait, newestSeq: Int = 0, missed: Int = 0
    ) -> Value {
        let entries = recorded.filter { Experiment.apiPathProblem($0.path) == nil }.sorted {
            ($0.started, $0.seq) < ($1.started, $1.seq)
        }
        var known: [String: String] = [:]  // id value → variable name
        var steps: [Value] = []
        for (index, entry) in entries.enumerated() {
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
            if index > 0 {
                let gap = min(entry.started.timeIntervalSince(entries[index - 1].started), maxWait)
                if gap >= shortestWait { step["wait"] = .number((gap * 1000).rounded() / 1000) }
            }
            if index + 1 < entries.count, entries[index + 1].started < entry.at { step["background"] = true }
            steps.append(.object(step))
        }
        let from = entries.first.map { Timestamp.string($0.started) } ?? ""
        return [
            "id": .string("recorded-session"), "title": "A recorded session",
            "source": [
                "article": .string("recorded by runloopd \(version)"), "url": "",
                "section": .string(entries.isEmpty ? "" : "from \(from), \(entries.count) requests"),
            ],
            "explanation":
                "The state-changing requests one runloopd answered, in order, with the status and the run-loop outcomes they got. Play it on another server with runloopd play --diff to see where the two differ.",
            "steps": .array(steps),
            "lastSeq": .number(Double(recorded.map(\.seq).max() ?? 0)),
            "journalSeq": .number(Double(newestSeq)),
            "missed": .number(Double(missed)),
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

/// The experiments `--experiments-dir` holds, or those compiled into the
/// binary when it names none, read once at start (the routes never touch the disk).
struct ExperimentLibrary: Sendable {
    let experiments: [Experiment]
    let problems: [String]
    /// Where they came from, for the start-up log.
    var origin = ""

    static func load(_ directory: String) -> ExperimentLibrary {
        if directory.isEmpty { return embedded() }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue
        else {
            return ExperimentLibrary(
                experiments: [], problems: ["\(directory) is not a folder"], origin: "no experiments (\(directory))")
        }
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
        let folder = (directory as NSString).standardizingPath
        let absolute = folder.hasPrefix("/") ? folder : FileManager.default.currentDirectoryPath + "/" + folder
        return ExperimentLibrary(
            experiments: experiments, problems: problems, origin: "\(counted(experiments.count)) from \(absolute)")
    }

    private static func counted(_ count: Int) -> String { count == 1 ? "1 experiment" : "\(count) experiments" }

    /// The experiments compiled into the binary (Plugins/EmbedFiles).
    static func embedded() -> ExperimentLibrary {
        var experiments: [Experiment] = []
        var problems: [String] = []
        for (name, bytes) in EmbeddedContent.experimentFiles {
            let id = (name as NSString).deletingPathExtension
            do throws(RunLoopError) {
                experiments.append(try Experiment(JSON.parse(bytes), fallbackId: id))
            } catch {
                problems.append("\(name): \(error.message)")
            }
        }
        return ExperimentLibrary(
            experiments: experiments, problems: problems, origin: "\(counted(experiments.count)) compiled in")
    }
}
