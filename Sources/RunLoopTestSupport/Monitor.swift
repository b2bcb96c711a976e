import Primitives

/// A value that threads change and wait on, every wait with a deadline (no
/// test sleeps): the one condition-wait primitive of the tests and benchmarks,
/// on the project's one lock family (`Locked`).
///
/// Thread-safety: every member may be called from any thread. Closures passed
/// to `update` and to `wait(timeout:until:)` run with the lock held and must
/// not call back into the same monitor.
public final class Monitor<State: Sendable>: Sendable {
    private struct Guarded {
        var state: State
        /// Counts updates, so a wait on something outside the state can tell that
        /// one happened.
        var generation = 0
    }

    private let locked: Locked<Guarded>

    public init(_ state: State) {
        locked = Locked(Guarded(state: state))
    }

    /// Changes the state and wakes every waiter.
    @discardableResult
    public func update<Result>(_ change: (inout State) throws -> Result) rethrows -> Result {
        let result = try locked.withLock { guarded -> Result in
            guarded.generation &+= 1
            return try change(&guarded.state)
        }
        locked.notifyAll()
        return result
    }

    /// The state now.
    public var value: State { locked.withLock { $0.state } }

    /// Waits until `predicate` holds on the state or `timeout` seconds pass;
    /// returns whether it held.
    @discardableResult
    public func wait(timeout: Double, until predicate: (State) -> Bool) -> Bool {
        locked.withLock(when: { predicate($0.state) }, timeout: timeout) { _, isReady in isReady }
    }

    /// Waits until `predicate`, a condition on something besides the state (a
    /// file, a snapshot taken elsewhere), holds or `timeout` seconds pass. It is
    /// re-evaluated after every update and at least every `recheck` seconds,
    /// without the lock held; returns its last evaluation.
    @discardableResult
    public func wait(timeout: Double, recheckEvery recheck: Double, until predicate: () -> Bool) -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: .seconds(timeout))
        while true {
            let seen = locked.withLock { $0.generation }
            if predicate() { return true }
            let left = clock.now.duration(to: deadline)
            if left <= .zero { return predicate() }
            let seconds = Double(left.components.seconds) + Double(left.components.attoseconds) / 1e18
            locked.withLock(when: { $0.generation != seen }, timeout: min(seconds, recheck)) { _, _ in }
        }
    }
}

/// Values that threads deliver and others wait for, in delivery order.
public final class Mailbox<Value: Sendable>: Sendable {
    private let values = Monitor<[Value]>([])

    public init() {}

    /// Delivers a value and wakes every waiter.
    public func put(_ value: Value) {
        values.update { $0.append(value) }
    }

    /// Every value delivered so far.
    public var all: [Value] { values.value }

    /// The first value, waiting up to `timeout` seconds for it (nil if none came).
    public func first(timeout: Double = 10) -> Value? {
        prefix(1, timeout: timeout).first
    }

    /// The first `count` values, waiting up to `timeout` seconds for them (fewer
    /// if they did not all come).
    public func prefix(_ count: Int, timeout: Double = 10) -> [Value] {
        values.wait(timeout: timeout) { $0.count >= count }
        return Array(values.value.prefix(count))
    }
}

/// Waits until `condition`, something nobody signals (a run loop's state, a
/// process's exit seen through `/proc`), holds or `timeout` seconds pass,
/// checking it every `recheck` seconds; returns its last evaluation.
@discardableResult
public func waitUntil(timeout: Double, recheckEvery recheck: Double = 0.01, _ condition: () -> Bool) -> Bool {
    Monitor(()).wait(timeout: timeout, recheckEvery: recheck, until: condition)
}
