import Foundation
import RunLoopCore

/// Applies a `Setup` by sending the API requests a user would send, one at a
/// time, each answered before the next: first every thread (with its common
/// modes), then every thread's sources, then per thread its timers,
/// observers, the task queue's suspension, tasks and performs. A thread alias
/// in a `signal`, `send` or `performOn` argument becomes the id the server
/// gave that thread, and a source alias in `signal`/`send` the id of that
/// source on the target thread (sources declared before the item: every
/// source is created before any timer, observer, task or perform).
struct SetupApplier {
    /// One answer from the API.
    struct Answer: Sendable {
        var status: Int
        var json: Value
    }

    /// Sends one request (`body` nil: none) and returns its answer, or why none came.
    typealias Send = (_ method: String, _ path: String, _ body: Value?) -> Result<Answer, Setup.Failure>

    let setup: Setup
    let send: Send

    /// Thread alias → the server's thread id.
    private(set) var threadIds: [String: String] = [:]
    /// The server's thread id → source alias → the server's source id.
    private(set) var sourceIds: [String: [String: String]] = [:]
    /// Requests sent.
    private(set) var requests = 0

    init(setup: Setup, send: @escaping Send) {
        self.setup = setup
        self.send = send
    }

    /// Creates everything; the first refused request ends it with a `Failure`
    /// naming the file, the item and the API's error. Returns, per declared
    /// thread, the id the server gave it.
    mutating func apply() throws(Setup.Failure) -> [String] {
        var created: [String] = []
        for thread in setup.threads {
            let answer = try request(
                "POST", "/api/threads", .object(thread.body), at: thread.label, expect: [201],
                setupKeys: Setup.threadKeys)
            guard let id = answer.json.field("id").string else {
                throw failure(at: thread.label, "POST /api/threads answered no thread id")
            }
            created.append(id)
            if let alias = thread.alias { threadIds[alias] = id }
            for (index, mode) in thread.commonModes.enumerated() {
                _ = try request(
                    "POST", "/api/threads/\(id)/modes/common", ["mode": .string(mode)],
                    at: "\(thread.label) commonModes[\(index)]", expect: 200)
            }
        }
        for (thread, id) in zip(setup.threads, created) {
            for (index, item) in thread.sources.enumerated() {
                let sourceId = try createInModes(.sources, item, on: id, at: "\(thread.label) sources[\(index)]")
                if let alias = item.alias { sourceIds[id, default: [:]][alias] = sourceId }
            }
        }
        for (thread, id) in zip(setup.threads, created) {
            for (index, item) in thread.timers.enumerated() {
                _ = try createInModes(.timers, item, on: id, at: "\(thread.label) timers[\(index)]")
            }
            for (index, item) in thread.observers.enumerated() {
                _ = try create(.observers, item, on: id, at: "\(thread.label) observers[\(index)]")
            }
            if thread.tasksSuspended {
                // Before the tasks, so none runs between its addition and the suspension.
                _ = try request(
                    "POST", "/api/threads/\(id)/tasks/suspend", nil, at: "\(thread.label) tasksSuspended", expect: 200)
            }
            for (index, item) in thread.tasks.enumerated() {
                _ = try create(.tasks, item, on: id, at: "\(thread.label) tasks[\(index)]")
            }
            for (index, item) in thread.performs.enumerated() {
                _ = try create(.performs, item, on: id, at: "\(thread.label) performs[\(index)]")
            }
        }
        return created
    }

    /// A source or a timer created, then put in the modes it lists: its id.
    private mutating func createInModes(_ kind: Setup.Kind, _ item: Setup.Item, on thread: String, at: String)
        throws(Setup.Failure) -> String
    {
        let answer = try create(kind, item, on: thread, at: at)
        guard let itemId = answer.json.field("id").string else {
            throw failure(at: at, "no \(kind == .sources ? "source" : "timer") id answered")
        }
        try adjustModes(item, answer: answer, path: "/api/threads/\(thread)/\(kind.path)/\(itemId)", at: at)
        return itemId
    }

    /// `POST /api/threads/{id}/<kind>` with the item's body, its selector arguments resolved.
    private mutating func create(_ kind: Setup.Kind, _ item: Setup.Item, on thread: String, at: String) throws(Setup
        .Failure) -> Answer
    {
        var body = item.body
        switch kind {
        case .tasks, .performs:
            // The call is the body itself: {selector, args, …}.
            if let selector = body["selector"]?.string, let args = body["args"]?.object {
                body["args"] = .object(resolve(selector, args, on: thread))
            }
        case .sources, .timers, .observers:
            if var action = body["action"]?.object, let selector = action["selector"]?.string,
                let args = action["args"]?.object
            {
                action["args"] = .object(resolve(selector, args, on: thread))
                body["action"] = .object(action)
            }
        }
        // Performs answer 202 (200 when they wait); the rest 201.
        let expected: Set<Int> = kind == .performs ? [200, 202] : [201]
        return try request(
            "POST", "/api/threads/\(thread)/\(kind.path)", .object(body), at: at, expect: expected,
            setupKeys: kind.setupKeys)
    }

    /// Adds the item to the declared modes it is not in, then removes it from the others.
    private mutating func adjustModes(_ item: Setup.Item, answer: Answer, path: String, at: String) throws(Setup
        .Failure)
    {
        guard let wanted = item.modes else { return }
        let current = (answer.json.field("modes").array ?? []).compactMap(\.string)
        for mode in wanted where !current.contains(mode) {
            _ = try request("POST", "\(path)/modes", ["mode": .string(mode)], at: "\(at) modes", expect: 200)
        }
        for mode in current where !wanted.contains(mode) {
            let escaped = mode.addingPercentEncoding(withAllowedCharacters: Self.segmentAllowed) ?? mode
            _ = try request("DELETE", "\(path)/modes/\(escaped)", nil, at: "\(at) modes", expect: 200)
        }
    }

    /// A selector's arguments with declared aliases replaced by server ids:
    /// `thread` of `signal`, `send` and `performOn`; `source` of `signal` and
    /// `send` (on the target thread); `performOn`'s inner call, on its target.
    /// A name that is no alias is left as it is (the API and the selector judge it).
    func resolve(_ selector: String, _ args: [String: Value], on thread: String) -> [String: Value] {
        guard ["signal", "send", "performOn"].contains(selector) else { return args }
        var args = args
        var target = thread
        if let name = args["thread"]?.string {
            target = threadIds[name] ?? name
            args["thread"] = .string(target)
        }
        if selector != "performOn", let name = args["source"]?.string, let id = sourceIds[target]?[name] {
            args["source"] = .string(id)
        }
        if selector == "performOn", let inner = args["selector"]?.string, let innerArgs = args["args"]?.object {
            args["args"] = .object(resolve(inner, innerArgs, on: target))
        }
        return args
    }

    private mutating func request(
        _ method: String, _ path: String, _ body: Value?, at: String, expect: Set<Int>, setupKeys: Set<String> = []
    ) throws(Setup.Failure) -> Answer {
        requests += 1
        let answer: Answer
        switch send(method, path, body) {
        case .success(let value): answer = value
        case .failure(let failure): throw self.failure(at: at, "\(method) \(path): \(failure.description)")
        }
        guard expect.contains(answer.status) else {
            let error = answer.json.field("error")
            var message = "\(method) \(path) answered \(answer.status)"
            if let code = error.field("code").string { message += " \(code)" }
            if let text = error.field("message").string { message += ": \(text)" }
            if let field = error.field("field").string { message += " (field \(field))" }
            if error.field("code") == "unknown_field", !setupKeys.isEmpty {
                message += "; the setup file itself also reads: \(setupKeys.sorted().joined(separator: ", "))"
            }
            throw failure(at: at, message)
        }
        return answer
    }

    /// What a path segment may hold unescaped.
    private static let segmentAllowed: CharacterSet = {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return allowed
    }()

    private func failure(at: String, _ message: String) -> Setup.Failure {
        Setup.Failure(description: "setup file \(setup.file): \(at): \(message)")
    }

    private mutating func request(
        _ method: String, _ path: String, _ body: Value?, at: String, expect: Int
    ) throws(Setup.Failure) -> Answer {
        try request(method, path, body, at: at, expect: [expect])
    }
}

extension Value {
    /// A member of an object (`.null` when absent or not an object).
    fileprivate func field(_ key: String) -> Value { object?[key] ?? .null }

    /// A list's items (nil for anything else).
    fileprivate var array: [Value]? {
        if case .array(let items) = self { return items }
        return nil
    }
}
