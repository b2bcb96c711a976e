import Primitives

/// An error as a value: a stable code, a human message, the offending field and
/// the kind of failure (an API maps kinds to its own statuses, in one place).
public struct RunLoopError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong, coarsely.
    public enum Kind: String, Sendable, Hashable {
        /// The input is malformed or out of range.
        case badValue
        /// No such thread, timer, source, task or selector.
        case notFound
        /// The request conflicts with the current state.
        case conflict
        /// A configured limit refuses more work.
        case limit
        /// A caller's wait passed its deadline.
        case deadline
        /// The worker ended before the work could run.
        case gone
        /// A selector ran and reported failure.
        case failed
    }

    /// The kind of failure.
    public var kind: Kind
    /// The stable machine-readable code, one of `ErrorCode`'s (the one list
    /// openapi.json and docs/api.md are checked against).
    public let errorCode: ErrorCode
    /// Its text (`not_found`, `bad_value`, `not_running`, …).
    public var code: String { errorCode.rawValue }
    /// A sentence for people.
    public var message: String
    /// The request field at fault, when there is one.
    public var field: String?

    /// Creates an error.
    public init(kind: Kind, code: ErrorCode, message: String, field: String? = nil) {
        self.kind = kind
        self.errorCode = code
        self.message = message
        self.field = field
    }

    public var description: String { "\(code): \(message)" }

    /// A bad input value in `field`.
    public static func badValue(_ field: String?, _ message: String) -> RunLoopError {
        RunLoopError(kind: .badValue, code: .badValue, message: message, field: field)
    }

    /// An unknown id.
    public static func notFound(_ what: String, _ id: String, field: String? = nil) -> RunLoopError {
        RunLoopError(kind: .notFound, code: .notFound, message: "no \(what) \(id)", field: field)
    }

    /// A state conflict with a specific code.
    public static func conflict(_ code: ErrorCode, _ message: String, field: String? = nil) -> RunLoopError {
        RunLoopError(kind: .conflict, code: code, message: message, field: field)
    }

    /// A limit refused the work.
    public static func limit(_ code: ErrorCode, _ message: String) -> RunLoopError {
        RunLoopError(kind: .limit, code: code, message: message, field: nil)
    }
}
