import Synchronization

/// Event ids: one counter for the event stream and the store, so an SSE
/// client's `Last-Event-ID` names a stored event. With a store, the first id
/// of a start is above every id an earlier start could have sent.
final class EventSequence: Sendable {
    private let last = Atomic<Int64>(0)

    /// The next id.
    func next() -> Int64 { last.wrappingAdd(1, ordering: .relaxed).newValue }

    /// The last id handed out.
    var current: Int64 { last.load(ordering: .relaxed) }

    /// Starts counting above `first - 1` (never goes back).
    func start(at first: Int64) {
        var seen = last.load(ordering: .relaxed)
        while seen < first - 1 {
            let (exchanged, original) = last.compareExchange(
                expected: seen, desired: first - 1, ordering: .relaxed)
            if exchanged { return }
            seen = original
        }
    }
}
