/// A named action and its arguments, as a perform, timer, source or task names it.
public struct SelectorCall: Sendable, Hashable {
    /// The selector's name (`echo`, `sleep`, …).
    public var selector: String
    /// Its arguments, validated against the selector's schema before it is queued.
    public var args: [String: Value]

    /// Creates a call.
    public init(selector: String, args: [String: Value] = [:]) {
        self.selector = selector
        self.args = args
    }
}
