/// A value made at most once and then shared: every copy of a struct that
/// holds the same `Memo` sees what the first caller made.
///
/// Thread-safety: any thread. `make` runs outside the lock (it may be any
/// code); when two callers make it at once, the first one stored wins and
/// both get it.
public final class Memo<Value: Sendable>: Sendable {
    private let stored = Locked<Value?>(nil)

    public init() {}

    /// The value, made by `make` the first time it is asked for.
    public func value(orMake make: () -> Value) -> Value {
        if let value = stored.withLock({ $0 }) { return value }
        let made = make()
        return stored.withLock { stored in
            if let stored { return stored }
            stored = made
            return made
        }
    }
}
