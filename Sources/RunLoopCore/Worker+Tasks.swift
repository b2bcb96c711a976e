import CoreFoundation
import Foundation

/// The idle task queue: a `beforeWaiting` observer runs ONE task per loop
/// turn (on the worker's thread); the queue is changed from any thread.
extension Worker {
    /// Adds a task; the loop runs one task per turn, before it waits. A loop
    /// asleep in a run is woken so it reaches its next idle moment now.
    public func addTask(id taskId: String, call: SelectorCall) throws(RunLoopError) -> TaskQueueSnapshot {
        guard !taskId.isEmpty, taskId.utf8.count <= 64 else { throw .badValue("id", "a task id is 1-64 bytes") }
        let checked = try selectors.validate(call)
        let (snap, loop) = try book.withLock { b throws(RunLoopError) in
            try b.checkAlive(id)
            try b.tasks.add(id: taskId, call: checked)
            return (b.tasks.snapshot(), b.loop)
        }
        // The loop may be between turns and reach its idle moment on its own:
        // the task becomes runnable only once "added" is out, so "added"
        // always precedes "started".
        emit(.task(thread: id, task: taskId, change: .added, runs: 0))
        book.withLock { $0.tasks.announce(id: taskId) }
        if let loop { CFRunLoopWakeUp(loop) }
        return snap
    }

    /// Removes one task (refused while it runs).
    public func removeTask(id taskId: String) throws(RunLoopError) -> TaskQueueSnapshot {
        let snap = try book.withLock { b throws(RunLoopError) in
            try b.tasks.remove(id: taskId)
            return b.tasks.snapshot()
        }
        emit(.task(thread: id, task: taskId, change: .removed, runs: 0))
        return snap
    }

    /// Removes every task (refused while one runs); returns how many.
    public func removeAllTasks() throws(RunLoopError) -> Int {
        try book.withLock { b throws(RunLoopError) in try b.tasks.removeAll() }
    }

    /// Suspends (true) or resumes (false) the queue; a running task finishes.
    public func setTasksSuspended(_ suspended: Bool) throws(RunLoopError) -> TaskQueueSnapshot {
        let (snap, loop) = try book.withLock { b throws(RunLoopError) in
            try b.checkAlive(id)
            b.tasks.suspended = suspended
            return (b.tasks.snapshot(), b.loop)
        }
        if !suspended, let loop { CFRunLoopWakeUp(loop) }
        return snap
    }

    /// The queue, suspended flag and done count.
    public func taskSnapshot() -> TaskQueueSnapshot {
        book.withLock { $0.tasks.snapshot() }
    }

    /// Runs a selector now through a source0 + wake-up instead of at idle time.
    @discardableResult
    public func executeTask(
        _ call: SelectorCall, deadline: CallerDeadline? = nil, completion: (@Sendable (PerformResult) -> Void)? = nil
    ) throws(RunLoopError) -> String {
        try perform(PerformSpec(call: call, modes: [.common]), deadline: deadline, completion: completion)
    }

    /// Adds the `beforeWaiting` observer that runs the queue (loop thread, at start).
    /// Its order, `Int.max - 1`, is after every user observer's and strictly
    /// before the tracer's `beforeWaiting` (`Int.max`), whatever order CF got
    /// them in: with equal orders, a mode made common after its first run had
    /// the task run after its turn was closed (its callout in no turn).
    func installTaskObserver(on loop: CFRunLoop) -> CFRunLoopObserver? {
        let observer = CFRunLoopObserverCreateWithHandler(
            kCFAllocatorDefault, Activities.beforeWaiting.rawValue, true, Int.max - 1
        ) { [weak self] _, _ in
            self?.runOneTask()
        }
        CFRunLoopAddObserver(loop, observer, kCFRunLoopCommonModes)
        if !policy.mode.isCommon && policy.mode != .default {
            CFRunLoopAddObserver(loop, observer, policy.mode.cfMode)
        }
        return observer
    }

    /// The `beforeWaiting` observer: runs ONE task, then wakes the loop if more
    /// remain so the next turn runs the next one.
    private func runOneTask() {
        let next: TaskQueue.Entry? = book.withLock { b in
            guard !b.tasks.suspended, b.tasks.running == nil, let first = b.tasks.entries.first, first.announced
            else { return nil }
            b.tasks.running = first.id
            return first
        }
        guard let first = next else { return }
        emit(.task(thread: id, task: first.id, change: .started, runs: first.runs))
        let outcome = callout(CalloutRef(kind: .task, id: first.id, selector: first.call.selector)) {
            runSelector(first.call)
        }
        let (change, runsSoFar, more) = book.withLock { b in
            let (change, runs) = b.tasks.finish(first, outcome: outcome)
            return (change, runs, !b.tasks.suspended && !b.tasks.entries.isEmpty)
        }
        emit(.task(thread: id, task: first.id, change: change, runs: runsSoFar))
        if more, let loop = CFRunLoopGetCurrent() { CFRunLoopWakeUp(loop) }
    }
}
