import Synchronization

/// A value made at most once and then shared: every copy of a struct that
/// holds the same `Memo` sees what the first caller made.
///
/// Thread-safety: any thread. `make` runs outside any lock (it may be any
/// code); when two callers make it at once, the first one stored wins and
/// both get it.
///
/// No lock: one is made per perform result, on the hot path. The value, once
/// made, lives in a box published with one compare-and-exchange (the shape of
/// swift-atomics' `ManagedAtomicLazyReference`); the box is never replaced,
/// so a reader that saw it may use it for as long as the `Memo` lives.
public final class Memo<Value: Sendable>: Sendable {
    private final class Box: Sendable {
        let value: Value
        init(_ value: Value) { self.value = value }
    }

    /// The published box, retained once by the `Memo`; nil until made.
    private let stored = Atomic<Unmanaged<Box>?>(nil)

    public init() {}

    deinit {
        stored.load(ordering: .acquiring)?.release()
    }

    /// The value, made by `make` the first time it is asked for.
    public func value(orMake make: () -> Value) -> Value {
        if let box = stored.load(ordering: .acquiring) { return box.takeUnretainedValue().value }
        let made = Unmanaged.passRetained(Box(make()))
        let (stored, original) = stored.compareExchange(expected: nil, desired: made, ordering: .acquiringAndReleasing)
        if stored { return made.takeUnretainedValue().value }
        made.release()
        // Another caller published first: theirs is the value (`original` is
        // not nil, or the exchange would have stored ours).
        return original.unsafelyUnwrapped.takeUnretainedValue().value
    }
}
