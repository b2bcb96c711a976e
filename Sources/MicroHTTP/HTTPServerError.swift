/// Why an `HTTPServer` could not start.
public struct HTTPServerError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, as a category.
    public enum Kind: Sendable {
        /// A configuration value is out of range.
        case invalidConfiguration
        /// The host could not be resolved to an address.
        case invalidAddress
        /// libmicrohttpd refused to start (port in use, no permission, …).
        case startFailed
        /// `start()` was called on a server that is running or was stopped.
        case alreadyStarted
    }

    /// The category of the failure.
    public var kind: Kind
    /// A sentence for people, including what libmicrohttpd reported.
    public var message: String

    /// Creates an error value.
    public init(kind: Kind, message: String) {
        self.kind = kind
        self.message = message
    }

    /// The message.
    public var description: String { message }
}
