import CoreFoundation
import Foundation
import Primitives

/// The type of one selector argument.
public enum ArgumentType: String, Sendable, Hashable {
    /// Text.
    case string
    /// A whole number.
    case integer
    /// Any finite number.
    case number
    /// true / false.
    case boolean
    /// A JSON object (its size bounded by the request's).
    case object
    /// A JSON array of strings (at most `maximum` items).
    case stringList
}

/// The schema of one selector argument.
public struct ArgumentSpec: Sendable, Hashable {
    /// The argument's name.
    public var name: String
    /// Its type.
    public var type: ArgumentType
    /// Whether a call must give it.
    public var required: Bool
    /// Smallest accepted number (integer / number types).
    public var minimum: Double?
    /// Largest accepted number, or longest string.
    public var maximum: Double?
    /// The value used when omitted.
    public var defaultValue: Value?
    /// One line for people.
    public var summary: String

    /// Creates a spec.
    public init(
        _ name: String, _ type: ArgumentType, required: Bool = false, minimum: Double? = nil,
        maximum: Double? = nil, defaultValue: Value? = nil, summary: String
    ) {
        self.name = name
        self.type = type
        self.required = required
        self.minimum = minimum
        self.maximum = maximum
        self.defaultValue = defaultValue
        self.summary = summary
    }
}

/// What a selector returns: a value and whether its work is finished (an idle
/// task that is not finished runs again on a later loop turn).
public struct SelectorOutcome: Sendable, Hashable {
    /// The result value.
    public var value: Value
    /// `false` asks the task queue to run it again later.
    public var finished: Bool

    /// Creates an outcome.
    public init(_ value: Value = .null, finished: Bool = true) {
        self.value = value
        self.finished = finished
    }
}

/// What a selector body sees: the worker it runs on (always on that worker's
/// thread), the registry of workers, and its validated arguments.
public struct SelectorContext: Sendable {
    /// The worker whose thread runs the selector.
    public let worker: Worker
    /// The registry (for selectors that reach other workers).
    public let registry: WorkerRegistry?
    /// Validated arguments, defaults filled in.
    public let args: [String: Value]
    /// The message a port source's action handles (nil elsewhere).
    public let message: PortMessage?

    /// Creates a context.
    public init(worker: Worker, registry: WorkerRegistry?, args: [String: Value], message: PortMessage? = nil) {
        self.worker = worker
        self.registry = registry
        self.args = args
        self.message = message
    }

    /// The string argument `name` (validated, so present when required or defaulted).
    public func string(_ name: String) -> String { args[name]?.string ?? "" }
    /// The integer argument `name`.
    public func integer(_ name: String) -> Int { args[name]?.integer ?? 0 }
    /// The number argument `name`.
    public func number(_ name: String) -> Double { args[name]?.number ?? 0 }
    /// The boolean argument `name`.
    public func bool(_ name: String) -> Bool { args[name]?.bool ?? false }
    /// The object argument `name` (empty when absent).
    public func object(_ name: String) -> [String: Value] {
        if case .object(let object)? = args[name] { return object }
        return [:]
    }
    /// The string-list argument `name` (nil when absent).
    public func strings(_ name: String) -> [String]? {
        guard case .array(let items)? = args[name] else { return nil }
        return items.compactMap(\.string)
    }
}

/// A named action compiled into the process: no code travels over HTTP.
public struct Selector: Sendable {
    /// Its name.
    public var name: String
    /// One line for people.
    public var summary: String
    /// The argument schema.
    public var arguments: [ArgumentSpec]
    /// Whether arguments outside the schema are accepted (`echo`).
    public var acceptsAnyArguments: Bool
    /// The body; runs on the target worker's thread.
    public var body: @Sendable (SelectorContext) throws(RunLoopError) -> SelectorOutcome

    /// Creates a selector.
    public init(
        name: String, summary: String, arguments: [ArgumentSpec] = [], acceptsAnyArguments: Bool = false,
        body: @escaping @Sendable (SelectorContext) throws(RunLoopError) -> SelectorOutcome
    ) {
        self.name = name
        self.summary = summary
        self.arguments = arguments
        self.acceptsAnyArguments = acceptsAnyArguments
        self.body = body
    }

    /// Checks `args` against the schema and fills in defaults; `fieldPrefix`
    /// names the field in errors (`args`).
    public func validate(_ args: [String: Value], fieldPrefix: String = "args") throws(RunLoopError)
        -> [String: Value]
    {
        var result = args
        let known = Set(arguments.map(\.name))
        if !acceptsAnyArguments {
            for key in args.keys.sorted() where !known.contains(key) {
                throw .badValue(
                    "\(fieldPrefix).\(key)",
                    "selector \(name) has no argument \(key)"
                        + (known.isEmpty ? " (it takes none)" : " (it takes \(known.sorted().joined(separator: ", ")))")
                )
            }
        }
        for spec in arguments {
            let field = "\(fieldPrefix).\(spec.name)"
            guard let value = args[spec.name], value != .null else {
                if spec.required {
                    throw .badValue(field, "selector \(name) needs \(spec.name) (\(spec.type.rawValue))")
                }
                if let d = spec.defaultValue { result[spec.name] = d }
                continue
            }
            switch spec.type {
            case .string:
                guard let s = value.string else { throw .badValue(field, "\(spec.name) must be a string") }
                if let maxLength = spec.maximum, Double(s.utf8.count) > maxLength {
                    throw .badValue(field, "\(spec.name) must be at most \(Int(maxLength)) bytes")
                }
            case .boolean:
                guard value.bool != nil else { throw .badValue(field, "\(spec.name) must be true or false") }
            case .object:
                guard case .object = value else { throw .badValue(field, "\(spec.name) must be an object") }
            case .stringList:
                guard case .array(let items) = value, items.allSatisfy({ $0.string != nil }) else {
                    throw .badValue(field, "\(spec.name) must be a list of strings")
                }
                if let most = spec.maximum, Double(items.count) > most {
                    throw .badValue(field, "\(spec.name) must have at most \(Int(most)) items")
                }
            case .integer, .number:
                guard let d = value.number, d.isFinite else {
                    throw .badValue(field, "\(spec.name) must be a finite number")
                }
                if spec.type == .integer, value.integer == nil {
                    throw .badValue(field, "\(spec.name) must be a whole number")
                }
                if let lo = spec.minimum, d < lo {
                    throw .badValue(field, "\(spec.name) must be >= \(Selector.format(lo))")
                }
                if let hi = spec.maximum, d > hi {
                    throw .badValue(field, "\(spec.name) must be <= \(Selector.format(hi))")
                }
            }
        }
        return result
    }

    static func format(_ d: Double) -> String {
        d.rounded() == d && abs(d) < 1e15 ? String(Int(d)) : String(d)
    }
}

/// The registry of named actions. Built-ins are registered at creation; an app
/// that embeds RunLoopCore may `register` its own. Thread-safe: the table is `Locked`.
public final class SelectorRegistry: Sendable {
    private let selectors: Locked<[String: Selector]>

    /// Creates a registry holding the built-in selectors, bounded by `limits`.
    public init(limits: Limits = Limits()) {
        var table: [String: Selector] = [:]
        for selector in BuiltinSelectors.all(limits: limits) { table[selector.name] = selector }
        selectors = Locked(table)
    }

    /// Adds or replaces a selector.
    public func register(_ selector: Selector) {
        // A replaced selector (its body and what it captured) is released after the lock.
        let replaced = selectors.withLock { $0.updateValue(selector, forKey: selector.name) }
        _ = replaced
    }

    /// The selector named `name`.
    public func selector(named name: String) -> Selector? {
        selectors.withLock { $0[name] }
    }

    /// Every selector, by name.
    public var all: [Selector] {
        selectors.withLock { Array($0.values) }.sorted { $0.name < $1.name }
    }

    /// Validates a call: the selector exists and its arguments fit the schema.
    /// Returns the call with defaults filled in.
    public func validate(_ call: SelectorCall, field: String = "selector") throws(RunLoopError) -> SelectorCall {
        guard let selector = selector(named: call.selector) else {
            throw RunLoopError(
                kind: .badValue, code: .unknownSelector,
                message: "no selector \(call.selector); GET /api/selectors lists them", field: field)
        }
        let prefix = field == "selector" ? "args" : "\(field).args"
        return SelectorCall(selector: call.selector, args: try selector.validate(call.args, fieldPrefix: prefix))
    }
}
