import Foundation
import Primitives
import RunLoopCore

/// One playable experiment: a titled, sourced list of HTTP steps with what to
/// capture from each answer and what to expect of it. The file format is
/// documented in `docs/experiments.md`; `GET /api/journal` exports a recorded
/// session in the same format.
public struct Experiment: Sendable {
    /// Where the example comes from.
    public struct Source: Sendable {
        /// The article's title, as written at its top.
        public var article: String
        /// Its original address ("" when it has none).
        public var url: String
        /// The section the example is in.
        public var section: String
    }

    /// One request and what its answer must show.
    public struct Step: Sendable {
        /// What the step does, for people: shown before it is played, so it
        /// never tells the outcome.
        public var say: String
        /// What happens, for people: shown once the step has answered (after a
        /// learner's guess); "" when there is nothing to reveal.
        public var then: String
        /// Played together with the next step, as one: a learner's Step (and
        /// `runloopd play --pace`) never pauses between them, so a timed action
        /// this step arms counts from the same moment as the run the next one starts.
        public var withNext: Bool
        /// `GET`, `POST` or `DELETE`.
        public var method: String
        /// The path (and query), with `${var}` placeholders: an API path
        /// (`Experiment.apiPathProblem`), checked again once they are filled in.
        public var path: String
        /// The JSON body, with `${var}` placeholders in its strings.
        public var body: Value?
        /// Variable → JSON path in the answer's body.
        public var capture: [(name: String, path: String)]
        /// The status the answer must have (nil: any).
        public var status: Int?
        /// JSON path → expected value or operator object.
        public var json: [(path: String, expected: Value)]
        /// Repeat the request (GET only) until the expectation holds, for at
        /// most this many seconds.
        public var until: Double?
        /// Seconds to let pass after the previous step was sent before this
        /// one is (a recorded session's pacing).
        public var wait: Double?
        /// Send it and go on without its answer; the answer is checked when it
        /// comes (a blocking run, and the stop sent while it runs). A later step
        /// that uses a variable it captures waits for it.
        public var background: Bool
    }

    /// A warning an experiment causes on purpose.
    public struct ExpectedWarning: Sendable, Hashable {
        /// A warning code (a `WarningCode`'s raw value).
        public var code: String
        /// Why the experiment raises it, for people.
        public var reason: String
    }

    /// A short id (the file name without `.json`).
    public var id: String
    /// The title.
    public var title: String
    /// The source article.
    public var source: Source
    /// A short explanation in English.
    public var explanation: String
    /// The steps, in order.
    public var steps: [Step]
    /// The warnings the experiment raises on purpose (a deliberate 400 ms
    /// handler sleep is a `stall`), each with why: shown as expected, not as a
    /// fault, on the threads the experiment created. Declared for the whole
    /// experiment, not per step: a warning is about a thread and may be raised
    /// after the step that caused it (the watchdog, a timed check).
    public var expectedWarnings: [ExpectedWarning]
    /// The document as read (served as is by `GET /api/experiments/{id}`).
    public var document: Value

    /// Reads an experiment from its JSON document; `fallbackId` names it when
    /// the document has no `id`. Errors say which step and field is wrong.
    public init(_ document: Value, fallbackId: String) throws(RunLoopError) {
        guard case .object(let root) = document else { throw Self.bad("the document must be a JSON object") }
        self.document = document
        id = root["id"]?.string ?? fallbackId
        guard let title = root["title"]?.string, !title.isEmpty else { throw Self.bad("title is required") }
        self.title = title
        let source = root["source"]?.object ?? [:]
        self.source = Source(
            article: source["article"]?.string ?? "", url: source["url"]?.string ?? "",
            section: source["section"]?.string ?? "")
        explanation = root["explanation"]?.string ?? ""
        guard case .array(let items)? = root["steps"], !items.isEmpty else {
            throw Self.bad("steps must be a non-empty list")
        }
        var steps: [Step] = []
        for (index, item) in items.enumerated() {
            steps.append(try Self.step(item, number: index + 1))
        }
        if steps.last?.withNext == true { throw Self.bad("step \(steps.count): the last step has no next to go with") }
        self.steps = steps
        expectedWarnings = try Self.expectedWarnings(root["expectedWarnings"])
    }

    /// `expectedWarnings`: a list of `{"code", "reason"}`, each code a warning
    /// runloopd raises, once.
    private static func expectedWarnings(_ value: Value?) throws(RunLoopError) -> [ExpectedWarning] {
        guard let value else { return [] }
        guard case .array(let items) = value else { throw bad("expectedWarnings must be a list") }
        var result: [ExpectedWarning] = []
        for (index, item) in items.enumerated() {
            let at = "expectedWarnings.\(index)"
            guard case .object(let entry) = item else { throw bad("\(at) must be an object with code and reason") }
            guard let code = entry["code"]?.string, WarningCode(rawValue: code) != nil else {
                throw bad("\(at).code must be one of \(WarningCode.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            guard let reason = entry["reason"]?.string,
                !reason.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty
            else { throw bad("\(at).reason must say why the experiment raises \(code)") }
            if let unknown = entry.keys.sorted().first(where: { $0 != "code" && $0 != "reason" }) {
                throw bad("\(at).\(unknown) is not a field (code, reason)")
            }
            guard !result.contains(where: { $0.code == code }) else { throw bad("\(at): \(code) is declared twice") }
            result.append(ExpectedWarning(code: code, reason: reason))
        }
        return result
    }

    /// Why `code` is expected by this experiment (nil: it is not).
    public func expectedReason(_ code: String) -> String? {
        expectedWarnings.first { $0.code == code }?.reason
    }

    private static func step(_ item: Value, number: Int) throws(RunLoopError) -> Step {
        let at = "step \(number)"
        guard case .object(let step) = item else { throw bad("\(at) must be an object") }
        guard case .object(let request)? = step["request"] else { throw bad("\(at): request is required") }
        let method = (request["method"]?.string ?? "GET").uppercased()
        guard ["GET", "POST", "DELETE"].contains(method) else {
            throw bad("\(at): request.method must be GET, POST or DELETE")
        }
        guard let path = request["path"]?.string else { throw bad("\(at): request.path is required") }
        if let problem = apiPathProblem(path) {
            throw bad("\(at): request.path \(visible(path)) is not an API path: \(problem)")
        }
        var capture: [(String, String)] = []
        if let map = step["capture"] {
            guard case .object(let pairs) = map else { throw bad("\(at): capture must be an object") }
            for key in pairs.keys.sorted() {
                guard let jsonPath = pairs[key]?.string else { throw bad("\(at): capture.\(key) must be a path") }
                capture.append((key, jsonPath))
            }
        }
        var status: Int?
        var json: [(String, Value)] = []
        if let expect = step["expect"] {
            guard case .object(let e) = expect else { throw bad("\(at): expect must be an object") }
            if let s = e["status"] {
                guard let code = s.integer, (100...599).contains(code) else {
                    throw bad("\(at): expect.status must be an HTTP status")
                }
                status = code
            }
            if let j = e["json"] {
                guard case .object(let pairs) = j else { throw bad("\(at): expect.json must be an object") }
                for key in pairs.keys.sorted() { json.append((key, pairs[key] ?? .null)) }
            }
        }
        var until: Double?
        if let u = step["until"] {
            guard let timeout = u.object?["timeout"]?.number, timeout > 0, timeout <= 60 else {
                throw bad("\(at): until.timeout must be seconds in (0, 60]")
            }
            guard method == "GET" else { throw bad("\(at): until repeats GET requests only") }
            until = timeout
        }
        var wait: Double?
        if let w = step["wait"] {
            guard let seconds = w.number, seconds.isFinite, (0...60).contains(seconds) else {
                throw bad("\(at): wait must be seconds in [0, 60]")
            }
            wait = seconds
        }
        var withNext = false
        if let w = step["withNext"] {
            guard let flag = w.bool else { throw bad("\(at): withNext must be true or false") }
            withNext = flag
        }
        if let t = step["then"], t.string == nil { throw bad("\(at): then must be a string") }
        var background = false
        if let b = step["background"] {
            guard let flag = b.bool else { throw bad("\(at): background must be true or false") }
            guard !flag || until == nil else { throw bad("\(at): a background step cannot repeat (until)") }
            background = flag
        }
        return Step(
            say: step["say"]?.string ?? "", then: step["then"]?.string ?? "", withNext: withNext, method: method,
            path: path, body: request["body"], capture: capture,
            status: status, json: json, until: until, wait: wait, background: background)
    }

    static func bad(_ message: String) -> RunLoopError { .badValue("experiment", message) }

    /// Why `path` is not an API path of the server an experiment is played on
    /// (nil: it is one). It must begin with `/api/` and hold no backslash, no
    /// control, format or space character and no `.` or `..` segment (`%2e`
    /// counts as a dot), so that no client resolves it to another host (`//host/`,
    /// `http://host/`, `/\host/`) or outside `/api/` (`/api/../healthz`), and no
    /// request line carries more than the path. The player checks the file's
    /// path here and the path as sent (variables filled in) again; the
    /// dashboard's lab applies the same rule (`Public/js/experiments.js`).
    public static func apiPathProblem(_ path: String) -> String? {
        guard path.utf8.starts(with: "/api/".utf8) else { return "it must begin with /api/" }
        let scalars = path.unicodeScalars
        if scalars.contains("\\") { return "it must not hold a backslash" }
        if scalars.contains(where: hidden) { return "it must not hold a control, format or space character" }
        // Bytes: "/", "?" and "#" never occur inside a longer UTF-8 sequence.
        let pathPart = path.utf8.prefix { $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") }
        for segment in pathPart.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false) {
            let dots = String(decoding: segment, as: UTF8.self).lowercased().replacingOccurrences(of: "%2e", with: ".")
            if dots == "." || dots == ".." { return "it must not hold a . or .. segment" }
        }
        return nil
    }

    /// Control, format and separator characters: what a path must not hold
    /// and what `visible` escapes.
    private static func hidden(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .control, .format, .spaceSeparator, .lineSeparator, .paragraphSeparator: return true
        default: return false
        }
    }

    /// `text` quoted for a message, each hidden character as `\u{202E}`.
    public static func visible(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            if scalar == "\"" || scalar == "\\" {
                out += "\\\(scalar)"
            } else if scalar != " " && hidden(scalar) {
                out += "\\u{\(String(scalar.value, radix: 16, uppercase: true))}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// The summary `GET /api/experiments` lists.
    public var summary: Value {
        [
            "id": .string(id), "title": .string(title),
            "source": [
                "article": .string(source.article), "url": .string(source.url), "section": .string(source.section),
            ],
            "explanation": .string(explanation), "steps": .number(Double(steps.count)),
        ]
    }
}

/// JSON paths (`a.b.0.c`, `list[key=value].field`), the expectation
/// operators and `${var}` substitution: the player's and the journal's rules.
public enum ExperimentPaths {
    /// The value at `path` in `value`, or nil when there is none.
    public static func resolve(_ path: String, in value: Value) -> Value? {
        var current = value
        for segment in segments(path) {
            guard let next = step(current, segment) else { return nil }
            current = next
        }
        return current
    }

    /// Splits `a.b[k=v].c` into `a`, `b`, `[k=v]`, `c` (dots inside brackets kept).
    static func segments(_ path: String) -> [String] {
        var result: [String] = []
        var current = ""
        var depth = 0
        for character in path {
            switch character {
            case "[" where depth == 0:
                if !current.isEmpty { result.append(current) }
                current = "["
                depth = 1
            case "]" where depth == 1:
                current.append("]")
                result.append(current)
                current = ""
                depth = 0
            case "." where depth == 0:
                if !current.isEmpty { result.append(current) }
                current = ""
            default:
                current.append(character)
            }
        }
        if !current.isEmpty { result.append(current) }
        return result
    }

    private static func step(_ value: Value, _ segment: String) -> Value? {
        if segment.hasPrefix("[") && segment.hasSuffix("]") {
            let inner = segment.dropFirst().dropLast()
            guard case .array(let items) = value else { return nil }
            if let eq = inner.firstIndex(of: "=") {
                let key = String(inner[..<eq])
                let wanted = String(inner[inner.index(after: eq)...])
                return items.first { item in
                    guard let field = item.object?[key] else { return false }
                    return text(field) == wanted
                }
            }
            guard let index = Int(inner), items.indices.contains(index) else { return nil }
            return items[index]
        }
        switch value {
        case .object(let object): return object[segment]
        case .array(let items):
            guard let index = Int(segment), items.indices.contains(index) else { return nil }
            return items[index]
        default: return nil
        }
    }

    /// A scalar as text (`t1`, `3`, `true`).
    public static func text(_ value: Value) -> String {
        switch value {
        case .string(let s): return s
        case .number(let d): return d.rounded() == d && abs(d) < 1e15 ? String(Int(d)) : String(d)
        case .bool(let b): return b ? "true" : "false"
        case .null: return "null"
        default: return JSON.string(value)
        }
    }

    /// Whether `actual` (nil: missing) meets `expected`: a literal (equal, numbers by value) or an
    /// operator object (`$gte $lte $gt $lt $ne $in $contains $exists`).
    public static func matches(_ actual: Value?, _ expected: Value) -> Bool {
        if case .object(let ops) = expected, !ops.isEmpty, ops.keys.allSatisfy({ $0.hasPrefix("$") }) {
            return ops.allSatisfy { op, operand in check(op, actual, operand) }
        }
        guard let actual else { return false }
        return actual == expected
    }

    private static func check(_ op: String, _ actual: Value?, _ operand: Value) -> Bool {
        switch op {
        case "$exists": return (actual != nil && actual != .null) == (operand.bool ?? true)
        case "$ne": return actual != operand
        case "$in":
            guard case .array(let options) = operand, let actual else { return false }
            return options.contains(actual)
        case "$contains":
            switch actual {
            case .array(let items)?: return items.contains(operand)
            case .string(let s)?: return operand.string.map { s.contains($0) } ?? false
            case .object(let o)?: return operand.string.map { o[$0] != nil } ?? false
            default: return false
            }
        case "$gte", "$lte", "$gt", "$lt":
            guard let a = actual?.number, let b = operand.number else { return false }
            switch op {
            case "$gte": return a >= b
            case "$lte": return a <= b
            case "$gt": return a > b
            default: return a < b
            }
        default: return false
        }
    }

    /// `${name}` in `text` replaced by the variables' values (unknown names stay).
    public static func substitute(_ text: String, _ vars: [String: String]) -> String {
        guard text.contains("${") else { return text }
        var result = text
        for (name, value) in vars { result = result.replacingOccurrences(of: "${\(name)}", with: value) }
        return result
    }

    /// `substitute` in every string of a JSON value (a string that is exactly
    /// `${name}` of a number-looking value stays a string: ids are strings).
    public static func substitute(_ value: Value, _ vars: [String: String]) -> Value {
        switch value {
        case .string(let s): return .string(substitute(s, vars))
        case .array(let items): return .array(items.map { substitute($0, vars) })
        case .object(let object): return .object(object.mapValues { substitute($0, vars) })
        default: return value
        }
    }
}
