import Foundation

/// One idle task: an identifier and the selector it runs.
public struct TaskSnapshot: Sendable, Hashable {
    /// The caller's identifier (unique in the queue).
    public var id: String
    /// The selector and arguments.
    public var call: SelectorCall
    /// Times it ran (a task that says "not finished" runs again later).
    public var runs: Int
    /// Whether it is running right now.
    public var running: Bool
    /// When it was added.
    public var addedAt: Date
}

/// The idle task queue as reported.
public struct TaskQueueSnapshot: Sendable, Hashable {
    /// Tasks in queue order.
    public var tasks: [TaskSnapshot]
    /// Whether running is suspended.
    public var suspended: Bool
    /// Tasks finished so far.
    public var done: Int
    /// Tasks that failed (removed after their error).
    public var failed: Int
    /// The queue's capacity.
    public var capacity: Int
}

/// The idle task queue (after CPFRunloopTaskManager): an observer on
/// `beforeWaiting` runs ONE task per loop turn. The queue itself is plain data
/// guarded by its worker's lock.
struct TaskQueue {
    struct Entry {
        var id: String
        var call: SelectorCall
        var runs = 0
        var addedAt = Date()
        /// Its `added` event is out: until then the loop leaves it (and those
        /// after it) alone, so no `started` can precede the `added`.
        var announced = false
    }

    var entries: [Entry] = []
    var suspended = false
    var running: String?
    var done = 0
    var failed = 0
    let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    mutating func add(id: String, call: SelectorCall) throws(RunLoopError) {
        guard !entries.contains(where: { $0.id == id }) else {
            throw .conflict(.taskExists, "a task with id \(id) is already queued", field: "id")
        }
        guard entries.count < capacity else {
            throw .limit(.queueFull, "the task queue is full (capacity \(capacity))")
        }
        entries.append(Entry(id: id, call: call))
    }

    /// The `added` event of `id` is out: the loop may run it.
    mutating func announce(id: String) {
        if let index = entries.firstIndex(where: { $0.id == id }) { entries[index].announced = true }
    }

    mutating func remove(id: String) throws(RunLoopError) {
        guard let index = entries.firstIndex(where: { $0.id == id }) else { throw .notFound("task", id) }
        guard running != id else {
            throw .conflict(.taskRunning, "task \(id) is running; it can be removed once it returns")
        }
        entries.remove(at: index)
    }

    mutating func removeAll() throws(RunLoopError) -> Int {
        if let running {
            throw .conflict(.taskRunning, "task \(running) is running; remove all once it returns")
        }
        let count = entries.count
        entries.removeAll()
        return count
    }

    /// Records the end of a run of `task`: removed when finished or failed,
    /// kept for another turn otherwise. Returns the change and its run count.
    mutating func finish(_ task: Entry, outcome: Result<SelectorOutcome, RunLoopError>) -> (TaskChange, Int) {
        running = nil
        guard let index = entries.firstIndex(where: { $0.id == task.id }) else { return (.ran, task.runs + 1) }
        entries[index].runs += 1
        let runs = entries[index].runs
        switch outcome {
        case .success(let result) where result.finished:
            entries.remove(at: index)
            done += 1
            return (.finished, runs)
        case .success:
            return (.ran, runs)
        case .failure:
            entries.remove(at: index)
            failed += 1
            return (.failed, runs)
        }
    }

    func snapshot() -> TaskQueueSnapshot {
        TaskQueueSnapshot(
            tasks: entries.map {
                TaskSnapshot(id: $0.id, call: $0.call, runs: $0.runs, running: running == $0.id, addedAt: $0.addedAt)
            }, suspended: suspended, done: done, failed: failed, capacity: capacity)
    }
}
