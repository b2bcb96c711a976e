/// An error as a value: a stable code, a human message, the offending field and
/// the kind of failure (which the HTTP layer maps to a status in one place).
public struct RunLoopError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, coarsely: decides the HTTP status.
    public enum Kind: String, Sendable, Hashable {
        /// The input is malformed or out of range (400).
        case badValue
        /// No such thread, timer, source, task or selector (404).
        case notFound
        /// The request conflicts with the current state (409).
        case conflict
        /// A configured limit refuses more work (429).
        case limit
        /// A wait passed its deadline (504).
        case deadline
        /// The worker ended before the work could run (410-like; reported as 409).
        case gone
        /// A selector ran and reported failure (reported in the result, 200/422).
        case failed
    }

    /// The kind of failure.
    public var kind: Kind
    /// A stable machine-readable code (`not_found`, `bad_value`, `not_running`, …).
    public var code: String
    /// A sentence for people.
    public var message: String
    /// The request field at fault, when there is one.
    public var field: String?

    /// Creates an error.
    public init(kind: Kind, code: String, message: String, field: String? = nil) {
        self.kind = kind
        self.code = code
        self.message = message
        self.field = field
    }

    public var description: String { "\(code): \(message)" }

    /// A bad input value in `field`.
    public static func badValue(_ field: String?, _ message: String) -> RunLoopError {
        RunLoopError(kind: .badValue, code: "bad_value", message: message, field: field)
    }

    /// An unknown id.
    public static func notFound(_ what: String, _ id: String, field: String? = nil) -> RunLoopError {
        RunLoopError(kind: .notFound, code: "not_found", message: "no \(what) \(id)", field: field)
    }

    /// A state conflict with a specific code.
    public static func conflict(_ code: String, _ message: String, field: String? = nil) -> RunLoopError {
        RunLoopError(kind: .conflict, code: code, message: message, field: field)
    }

    /// A limit refused the work.
    public static func limit(_ code: String, _ message: String) -> RunLoopError {
        RunLoopError(kind: .limit, code: code, message: message, field: nil)
    }
}
