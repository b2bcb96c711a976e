import ArgumentParser
import Foundation

/// The `RUNLOOPD_*` environment variables: the one place the options read
/// the environment. `current` is the process's; a test parses under
/// `Environment.$current.withValue(…)` with its own.
struct Environment: Sendable {
    @TaskLocal static var current = Environment(ProcessInfo.processInfo.environment)

    /// Every variable (only the `RUNLOOPD_` ones are ever read).
    let variables: [String: String]

    init(_ variables: [String: String]) { self.variables = variables }

    /// `RUNLOOPD_<name>`'s text; an empty variable counts as unset.
    subscript(name: String) -> String? {
        variables[Self.prefix + name].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// `RUNLOOPD_<name>` read the way its flag's value is read (`Value(argument:)`);
    /// nil when unset, an error naming the variable when the flag would refuse it.
    func value<Value: ExpressibleByArgument>(_ name: String, as _: Value.Type = Value.self) throws(ValidationError)
        -> Value?
    {
        guard let text = self[name] else { return nil }
        guard let value = Value(argument: text) else {
            throw ValidationError(
                "The value '\(text)' of \(Self.prefix + name) is invalid for '\(Self.flag(name))'"
                    + " (--help says what it takes)")
        }
        return value
    }

    /// An on/off variable: `1`, `true`, `yes`, `on` or `0`, `false`, `no`, `off` (any case).
    func toggle(_ name: String) throws(ValidationError) -> Bool? {
        guard let text = self[name] else { return nil }
        switch text.lowercased() {
        case "1", "true", "yes", "on": return true
        case "0", "false", "no", "off": return false
        default:
            throw ValidationError(
                "The value '\(text)' of \(Self.prefix + name) is invalid for '\(Self.flag(name))': "
                    + "give 1, true, yes or on (0, false, no or off to leave it off)")
        }
    }

    /// A comma-separated list (empty items dropped) for a repeatable option.
    func list(_ name: String) -> [String] {
        (self[name] ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter {
            !$0.isEmpty
        }
    }

    static let prefix = "RUNLOOPD_"

    /// `MAX_WAIT` → `--max-wait`: every variable is its flag in upper case with underscores.
    static func flag(_ name: String) -> String {
        "--" + name.lowercased().replacingOccurrences(of: "_", with: "-")
    }
}

/// An option's value: the flag's when given, else its `RUNLOOPD_` variable's
/// read by the same `Value(argument:)`, else the default. Declared as
/// `@Option var port = Setting(8080, env: "PORT")`; its group's `validate()`
/// calls `resolve()` once, so a bad variable stops the start like a bad
/// flag. `--help` shows the default and the variable.
struct Setting<Value: ExpressibleByArgument & Sendable>: ExpressibleByArgument, Sendable {
    /// The value: the default until `resolve()` reads the variable.
    private(set) var value: Value
    /// The variable still to read (nil once the flag gave the value or once resolved).
    private var variable: String?
    /// `RUNLOOPD_X=…` when the variable gave the value (for messages).
    private(set) var origin: String?

    /// The default, which `RUNLOOPD_<variable>` overrides.
    init(_ defaultValue: Value, env variable: String) {
        self.value = defaultValue
        self.variable = variable
    }

    init?(argument: String) {
        guard let value = Value(argument: argument) else { return nil }
        self.value = value
    }

    /// Reads the variable unless the flag was given (once; later calls do nothing).
    mutating func resolve(_ environment: Environment = .current) throws(ValidationError) {
        guard let variable else { return }
        self.variable = nil
        guard let value = try environment.value(variable, as: Value.self) else { return }
        self.value = value
        origin = Environment.prefix + variable + "=" + (environment[variable] ?? "")
    }

    /// The default and its variable, as `--help` shows them.
    var defaultValueDescription: String {
        let shown = value.defaultValueDescription
        let variable = variable.map { "; env \(Environment.prefix)\($0)" } ?? ""
        return (shown.isEmpty ? "none" : shown) + variable
    }

    static var allValueStrings: [String] { Value.allValueStrings }

    static var defaultCompletionKind: CompletionKind { Value.defaultCompletionKind }
}

extension ParsableArguments {
    /// Resolves the settings named, each once: its flag's value, else its
    /// variable's, else its default (`Setting.resolve`).
    mutating func resolve<each Value: ExpressibleByArgument & Sendable>(
        _ settings: repeat WritableKeyPath<Self, Setting<each Value>>
    ) throws {
        let environment = Environment.current
        repeat try self[keyPath: each settings].resolve(environment)
    }
}

extension Setting where Value: Comparable {
    /// Refuses a value outside `range`: "`flag` must be `rule`", naming the
    /// variable when it gave the value.
    func check(_ flag: String, _ range: ClosedRange<Value>, _ rule: String) throws(ValidationError) {
        guard range.contains(value) else { throw ValidationError(refusal(flag, rule)) }
    }

    /// `check` for a lower bound only.
    func check(_ flag: String, _ range: PartialRangeFrom<Value>, _ rule: String) throws(ValidationError) {
        guard range.contains(value) else { throw ValidationError(refusal(flag, rule)) }
    }
}

extension Setting {
    /// "`flag` must be `rule`" (and where the value came from when a variable gave it).
    func refusal(_ flag: String, _ rule: String) -> String {
        "\(flag) must be \(rule)" + (origin.map { " (it is \($0))" } ?? "")
    }
}

extension Setting where Value == Count {
    var count: Int { value.raw }
}

extension Setting where Value == Seconds {
    var seconds: Double { value.raw }
}

extension Setting where Value == ByteSize {
    var bytes: Int64 { value.raw }
}

extension Setting where Value == Number {
    var number: Double { value.raw }
}
