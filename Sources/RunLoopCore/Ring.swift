import DequeModule
import Primitives

/// A bounded window of the most recent elements: appending beyond the
/// capacity forgets the oldest (O(1), on swift-collections' `Deque`).
///
/// Plain data: guarded by whoever owns it (a worker's or a source's lock).
struct Ring<Element> {
    private(set) var elements = Deque<Element>()
    let capacity: Int
    /// Elements forgotten to make room, since the ring began.
    private(set) var dropped = 0

    init(capacity: Int) { self.capacity = max(1, capacity) }

    mutating func append(_ item: Element) {
        if elements.count >= capacity {
            elements.removeFirst()
            dropped += 1
        }
        elements.append(item)
    }

    /// The elements, oldest first. (An empty ring answers `[]` without copying:
    /// copying an empty `Deque` writes a zero count into the standard library's
    /// shared empty-array storage, which ThreadSanitizer reports as a race.)
    var items: [Element] { elements.isEmpty ? [] : Array(elements) }

    var count: Int { elements.count }
}

extension Ring: Sendable where Element: Sendable {}

/// Records by id, in creation order: the timers, sources and observers of a
/// worker. Invalidated records are kept (listed, readable by id) until more
/// than twice `limit` are kept; then the oldest dead ones beyond `limit` go,
/// so churn cannot grow memory without bound.
///
/// Plain data, guarded by the owning worker's lock: `isLive` and `counts`
/// run under that lock, so they read the record's own flags (no CF call, no
/// other lock).
struct RecordTable<Record> {
    private var byId: [String: Record] = [:]
    private var order: [String] = []
    private let limit: Int
    private let isLive: (Record) -> Bool
    /// Whether a live record counts against the limit (runloopd's own
    /// keep-alive does not).
    private let counts: (Record) -> Bool

    init(limit: Int, counts: @escaping (Record) -> Bool = { _ in true }, isLive: @escaping (Record) -> Bool) {
        self.limit = limit
        self.isLive = isLive
        self.counts = counts
    }

    subscript(id: String) -> Record? { byId[id] }

    /// Every record kept, oldest first.
    var all: [Record] { order.compactMap { byId[$0] } }

    /// Records that can still act and count against the limit.
    var liveCount: Int { byId.values.reduce(0) { $0 + (isLive($1) && counts($1) ? 1 : 0) } }

    /// Throws `code` when thread `thread` already has `limit` live records
    /// (`noun`: what they are, for the message).
    func checkRoom(_ code: ErrorCode, _ noun: String, thread: String) throws(RunLoopError) {
        let live = liveCount
        guard live < limit else {
            throw .limit(code, "thread \(thread) already has \(live) \(noun) (limit \(limit))")
        }
    }

    /// Adds `record`; returns the dead records it pruned. The caller returns
    /// them out of its `withLock` closure, so the last reference to each (and
    /// the CF object it frees) goes after the lock, never under it.
    mutating func insert(_ record: Record, id: String) -> [Record] {
        byId[id] = record
        order.append(id)
        let kept = max(1, limit)
        guard order.count > kept * 2 else { return [] }
        let dead = order.filter { byId[$0].map { !isLive($0) } ?? true }
        let pruned = dead.prefix(order.count - kept).compactMap { byId.removeValue(forKey: $0) }
        order.removeAll { byId[$0] == nil }
        return pruned
    }
}

/// Ids `prefix` + n (`t1`, `tm3`, `p12`, …), never reused by one counter.
public final class IdCounter: Sendable {
    private let counters = Locked<[String: Int]>([:])

    /// A fresh counter.
    public init() {}

    /// The next id with `prefix`.
    public func next(_ prefix: String) -> String {
        let next = counters.withLock { counters in
            counters[prefix, default: 0] += 1
            return counters[prefix] ?? 0
        }
        return "\(prefix)\(next)"
    }
}
