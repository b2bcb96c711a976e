import RunLoopCore

/// A request body as a JSON object, read field by field: every field is
/// checked for type and range, and fields nobody read are rejected, so a typo
/// is never silently ignored.
struct Body {
    private let members: [String: Value]
    private let prefix: String
    private let allowed: Set<String>

    /// Parses `bytes` (no body at all = `{}`; a body of only whitespace is not
    /// JSON and is refused like any other) and declares the fields this
    /// endpoint accepts.
    init(_ bytes: [UInt8], allowed: Set<String>) throws(RunLoopError) {
        if bytes.isEmpty {
            members = [:]
        } else {
            guard case .object(let object) = try JSON.parse(bytes) else {
                throw .badValue(nil, "the body must be a JSON object")
            }
            members = object
        }
        prefix = ""
        self.allowed = allowed
        try rejectUnknown()
    }

    /// A nested object field read the same way.
    init(object: [String: Value], prefix: String, allowed: Set<String>) throws(RunLoopError) {
        members = object
        self.prefix = prefix
        self.allowed = allowed
        try rejectUnknown()
    }

    private func rejectUnknown() throws(RunLoopError) {
        // Sorted only to name the first unknown field when there is one.
        guard !members.keys.allSatisfy(allowed.contains) else { return }
        for key in members.keys.sorted() where !allowed.contains(key) {
            throw RunLoopError(
                kind: .badValue, code: .unknownField,
                message: "unknown field \(prefix)\(key); accepted: \(allowed.sorted().joined(separator: ", "))",
                field: prefix + key)
        }
    }

    func field(_ name: String) -> String { prefix + name }

    /// Whether the field is present and not null.
    func has(_ name: String) -> Bool {
        if let value = members[name], value != .null { return true }
        return false
    }

    func string(_ name: String, maxLength: Int = 256) throws(RunLoopError) -> String? {
        guard let value = members[name], value != .null else { return nil }
        guard let s = value.string else { throw .badValue(field(name), "\(field(name)) must be a string") }
        guard s.utf8.count <= maxLength else {
            throw .badValue(field(name), "\(field(name)) must be at most \(maxLength) bytes")
        }
        return s
    }

    func requiredString(_ name: String, maxLength: Int = 256) throws(RunLoopError) -> String {
        guard let s = try string(name, maxLength: maxLength) else {
            throw .badValue(field(name), "\(field(name)) is required")
        }
        return s
    }

    func bool(_ name: String) throws(RunLoopError) -> Bool? {
        guard let value = members[name], value != .null else { return nil }
        guard let b = value.bool else { throw .badValue(field(name), "\(field(name)) must be true or false") }
        return b
    }

    func number(_ name: String) throws(RunLoopError) -> Double? {
        guard let value = members[name], value != .null else { return nil }
        guard let d = value.number, d.isFinite else {
            throw .badValue(field(name), "\(field(name)) must be a finite number")
        }
        return d
    }

    func integer(_ name: String, min: Int, max: Int) throws(RunLoopError) -> Int? {
        guard let value = members[name], value != .null else { return nil }
        guard let i = value.integer else { throw .badValue(field(name), "\(field(name)) must be a whole number") }
        guard i >= min && i <= max else {
            throw .badValue(field(name), "\(field(name)) must be between \(min) and \(max)")
        }
        return i
    }

    func object(_ name: String) throws(RunLoopError) -> [String: Value]? {
        guard let value = members[name], value != .null else { return nil }
        guard let o = value.object else { throw .badValue(field(name), "\(field(name)) must be an object") }
        return o
    }

    func value(_ name: String) -> Value? { members[name] }

    func mode(_ name: String) throws(RunLoopError) -> RunLoopMode? {
        guard let text = try string(name, maxLength: 1024) else { return nil }
        do throws(RunLoopError) {
            return try RunLoopMode(text)
        } catch {
            throw .badValue(field(name), error.message)
        }
    }

    /// A `{"selector", "args"?}` object.
    func selectorCall(_ name: String) throws(RunLoopError) -> SelectorCall? {
        guard let object = try object(name) else { return nil }
        let nested = try Body(object: object, prefix: field(name) + ".", allowed: ["selector", "args"])
        return try nested.selectorCallHere()
    }

    /// `selector` and `args` fields of this object as a call.
    func selectorCallHere() throws(RunLoopError) -> SelectorCall {
        let selector = try requiredString("selector", maxLength: 64)
        let args = try object("args") ?? [:]
        return SelectorCall(selector: selector, args: args)
    }
}
