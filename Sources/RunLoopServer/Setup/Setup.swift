import Foundation
import RunLoopCore

/// A declared setup (`runloopd --setup FILE`, `GET /api/setup`): threads with
/// their sources, timers, observers, idle tasks and performs, as the bodies of
/// the API requests that create them. The file's own keys (a thread's or a
/// source's `id` alias, `commonModes`, `tasksSuspended`, an item's `modes`,
/// the item lists) are read here; every other key is sent to the API as is,
/// so the API validates it and words its errors. The format is in
/// `docs/setup.md`.
public struct Setup: Sendable {
    /// One declared thread.
    struct Thread: Sendable {
        /// Its position in `threads` (from 0), for messages.
        var index: Int
        /// The alias items and selector arguments use for it (`id`); nil: none.
        var alias: String?
        /// The `POST /api/threads` body (`name`, `keepAlive`, `run`, …).
        var body: [String: Value]
        /// Modes added to its common-modes set (`POST …/modes/common`), in order.
        var commonModes: [String]
        /// Its items, by kind.
        var sources: [Item]
        var timers: [Item]
        var observers: [Item]
        var tasks: [Item]
        var performs: [Item]
        /// Whether its idle task queue is suspended (`POST …/tasks/suspend`, before the tasks are added).
        var tasksSuspended: Bool

        /// `thread "ticker" (threads[0])`, for messages.
        var label: String {
            alias.map { "thread \(JSON.quoted($0)) (threads[\(index)])" } ?? "threads[\(index)]"
        }
    }

    /// One declared timer, source, observer, task or perform.
    struct Item: Sendable {
        /// A source's alias (`id`), for `signal` and `send` arguments.
        var alias: String?
        /// The modes it must end up in (`POST …/modes`, `DELETE …/modes/{mode}`); nil: its creation mode only.
        var modes: [String]?
        /// The creation request's body.
        var body: [String: Value]
    }

    /// The kinds of items, in the order they are created.
    enum Kind: String, Sendable, CaseIterable {
        case sources, timers, observers, tasks, performs

        /// The keys of an item of this kind the setup reads itself (not sent to the API).
        var setupKeys: Set<String> {
            switch self {
            case .sources: ["id", "modes"]
            case .timers: ["modes"]
            case .observers, .tasks, .performs: []
            }
        }

        /// The API path under `/api/threads/{id}` that creates one.
        var path: String {
            switch self {
            case .sources: "sources"
            case .timers: "timers"
            case .observers: "observers"
            case .tasks: "tasks"
            case .performs: "perform"
            }
        }
    }

    /// The format's version (`version`); 1 is the only one.
    static let version = 1
    /// A thread's keys the setup reads itself; the others are the `POST /api/threads` body.
    static let threadKeys: Set<String> = Set(["id", "commonModes", "tasksSuspended"] + Kind.allCases.map(\.rawValue))
    /// The top-level keys.
    static let topKeys: Set<String> = ["version", "description", "threads"]
    /// The longest alias.
    static let maxAliasLength = 64

    /// Where it was read from (for messages); `"-"` when it was not a file.
    public let file: String
    /// The declared threads, in file order.
    let threads: [Thread]

    /// Why a setup cannot be read or applied: the message names the file, the
    /// item and, for a refused request, the API's answer.
    public struct Failure: Error, CustomStringConvertible, Sendable {
        /// The whole message.
        public let description: String
    }

    /// Reads and checks a setup file (its shape only: the API checks the rest when it is applied).
    public static func load(path: String) throws(Failure) -> Setup {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw Failure(description: "setup file \(path): cannot be read (missing or not readable)")
        }
        return try parse(Array(data), file: path)
    }

    /// Parses a setup document.
    public static func parse(_ bytes: [UInt8], file: String = "-") throws(Failure) -> Setup {
        func fail(_ message: String) -> Failure { Failure(description: "setup file \(file): \(message)") }
        let document: Value
        do throws(JSONReader.Failure) {
            document = try JSONReader.parse(bytes)
        } catch {
            throw fail("not JSON: \(error.description)")
        }
        guard case .object(let top) = document else {
            throw fail("the file must be a JSON object {\"threads\": [...]}")
        }
        for key in top.keys.sorted() where !topKeys.contains(key) {
            throw fail("unknown field \(key); accepted: \(topKeys.sorted().joined(separator: ", "))")
        }
        if let version = top["version"], version != .null, version != .number(Double(Self.version)) {
            throw fail("version must be \(Self.version)")
        }
        if let description = top["description"], description != .null, description.string == nil {
            throw fail("description must be a string")
        }
        let list: [Value]
        switch top["threads"] {
        case nil, .null?: list = []
        case .array(let items)?: list = items
        default: throw fail("threads must be a list of thread objects")
        }
        var threads: [Thread] = []
        var aliases = Set<String>()
        for (index, item) in list.enumerated() {
            let thread = try parseThread(item, index: index, fail: fail)
            if let alias = thread.alias, !aliases.insert(alias).inserted {
                throw fail("\(thread.label): the id \(JSON.quoted(alias)) is already used by another thread")
            }
            threads.append(thread)
        }
        return Setup(file: file, threads: threads)
    }

    private static func parseThread(_ value: Value, index: Int, fail: (String) -> Failure) throws(Failure) -> Thread {
        guard case .object(var members) = value else { throw fail("threads[\(index)] must be an object") }
        let where_ = "threads[\(index)]"
        let alias = try aliasField(members.removeValue(forKey: "id"), at: where_, fail: fail)
        var thread = Thread(
            index: index, alias: alias, body: [:], commonModes: [], sources: [], timers: [], observers: [], tasks: [],
            performs: [], tasksSuspended: false)
        let label = thread.label
        thread.commonModes =
            try stringList(members.removeValue(forKey: "commonModes"), at: "\(label) commonModes", fail: fail) ?? []
        switch members.removeValue(forKey: "tasksSuspended") {
        case nil, .null?: break
        case .bool(let flag)?: thread.tasksSuspended = flag
        default: throw fail("\(label) tasksSuspended must be true or false")
        }
        for kind in Kind.allCases {
            let items = try parseItems(members.removeValue(forKey: kind.rawValue), kind: kind, label: label, fail: fail)
            switch kind {
            case .sources: thread.sources = items
            case .timers: thread.timers = items
            case .observers: thread.observers = items
            case .tasks: thread.tasks = items
            case .performs: thread.performs = items
            }
        }
        // What is left is the thread's creation body; the API checks it (unknown fields included).
        thread.body = members
        return thread
    }

    private static func parseItems(
        _ value: Value?, kind: Kind, label: String, fail: (String) -> Failure
    ) throws(Failure) -> [Item] {
        let list: [Value]
        switch value {
        case nil, .null?: return []
        case .array(let items)?: list = items
        default: throw fail("\(label) \(kind.rawValue) must be a list of objects")
        }
        var items: [Item] = []
        var aliases = Set<String>()
        for (index, element) in list.enumerated() {
            let at = "\(label) \(kind.rawValue)[\(index)]"
            guard case .object(var members) = element else { throw fail("\(at) must be an object") }
            var item = Item(alias: nil, modes: nil, body: [:])
            if kind.setupKeys.contains("id") {
                item.alias = try aliasField(members.removeValue(forKey: "id"), at: at, fail: fail)
                if let alias = item.alias, !aliases.insert(alias).inserted {
                    throw fail("\(at): the id \(JSON.quoted(alias)) is already used by another source of this thread")
                }
            }
            if kind.setupKeys.contains("modes") {
                item.modes = try stringList(members.removeValue(forKey: "modes"), at: "\(at) modes", fail: fail)
                if item.modes?.isEmpty == true { throw fail("\(at) modes must name at least one mode") }
            }
            item.body = members
            items.append(item)
        }
        return items
    }

    private static func aliasField(_ value: Value?, at: String, fail: (String) -> Failure) throws(Failure) -> String? {
        switch value {
        case nil, .null?: return nil
        case .string(let text)? where !text.isEmpty && text.utf8.count <= maxAliasLength: return text
        default: throw fail("\(at) id must be a string of 1-\(maxAliasLength) bytes")
        }
    }

    private static func stringList(_ value: Value?, at: String, fail: (String) -> Failure) throws(Failure) -> [String]?
    {
        switch value {
        case nil, .null?: return nil
        case .array(let items)?:
            var names: [String] = []
            for item in items {
                guard let name = item.string else { throw fail("\(at) must be a list of mode names") }
                names.append(name)
            }
            return names
        default: throw fail("\(at) must be a list of mode names")
        }
    }
}
