import Dispatch
import Foundation

/// A deadline scheduled with `Deadlines.after`; `cancel()` drops its action at once.
public struct DeadlineToken: Sendable, Hashable {
    fileprivate let id: UInt64

    /// Drops the action (and what it captured) if it has not run yet.
    public func cancel() {
        Deadlines.shared.cancel(id)
    }
}

/// Cancellable deadlines on one timer: the "answer 504 if nothing else answered
/// within N s" guards of long requests.
///
/// `DispatchQueue.asyncAfter` cannot be cancelled: every fast answer left its
/// 10–30 s guard (and the request it captured) queued until the deadline, so
/// 16,000 performs/s kept ~500,000 closures alive and the dispatch threads
/// busy. Here a cancelled deadline releases its action immediately; the timer
/// heap keeps only (time, id) pairs and is compacted when most are cancelled.
public final class Deadlines: @unchecked Sendable {
    /// The process-wide scheduler.
    public static let shared = Deadlines()

    private struct Entry {
        var at: UInt64
        var id: UInt64
    }

    private let lock = NSLock()
    private var heap: [Entry] = []
    private var actions: [UInt64: @Sendable () -> Void] = [:]
    private var nextId: UInt64 = 0
    /// The uptime (ns) the timer is set for; `UInt64.max` when unarmed.
    private var armedAt = UInt64.max
    private let queue = DispatchQueue(label: "runloopd.deadlines")
    private let timer: any DispatchSourceTimer

    private init() {
        timer = DispatchSource.makeTimerSource(queue: queue)
        timer.setEventHandler { [unowned self] in self.fireDue() }
        timer.activate()
    }

    /// Runs `action` on a background queue after `seconds`, unless cancelled first.
    @discardableResult
    public static func after(_ seconds: Double, _ action: @escaping @Sendable () -> Void) -> DeadlineToken {
        shared.schedule(seconds, action)
    }

    /// Deadlines scheduled and not yet run or cancelled (for tests and leak checks).
    public var pendingCount: Int {
        lock.lock()
        defer { lock.unlock() }
        return actions.count
    }

    private func schedule(_ seconds: Double, _ action: @escaping @Sendable () -> Void) -> DeadlineToken {
        let delay = seconds.isFinite ? max(0, min(seconds, 1e7)) : 1e7
        let at = DispatchTime.now().uptimeNanoseconds &+ UInt64(delay * 1e9)
        lock.lock()
        nextId &+= 1
        let id = nextId
        actions[id] = action
        push(Entry(at: at, id: id))
        if at < armedAt {
            armedAt = at
            arm(at)  // under the lock: a concurrent re-arm for a later time cannot overtake it
        }
        lock.unlock()
        return DeadlineToken(id: id)
    }

    fileprivate func cancel(_ id: UInt64) {
        lock.lock()
        let removed = actions.removeValue(forKey: id)
        if heap.count > 64 && heap.count > 2 * actions.count { compact() }
        lock.unlock()
        _ = removed  // released here, outside the lock
    }

    private func arm(_ at: UInt64) {
        timer.schedule(deadline: DispatchTime(uptimeNanoseconds: at), leeway: .milliseconds(1))
    }

    /// Timer handler (on `queue`): runs every due action, re-arms for the next.
    private func fireDue() {
        var due: [@Sendable () -> Void] = []
        lock.lock()
        let now = DispatchTime.now().uptimeNanoseconds
        while let top = heap.first, top.at <= now {
            popFirst()
            if let action = actions.removeValue(forKey: top.id) { due.append(action) }
        }
        while let top = heap.first, actions[top.id] == nil { popFirst() }
        armedAt = heap.first?.at ?? UInt64.max
        if armedAt != UInt64.max { arm(armedAt) }
        lock.unlock()
        for action in due { action() }
    }

    // MARK: binary heap on `at` (lock held)

    private func push(_ entry: Entry) {
        heap.append(entry)
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].at < heap[parent].at else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    private func popFirst() {
        let last = heap.removeLast()
        guard !heap.isEmpty else { return }
        heap[0] = last
        siftDown(0)
    }

    private func siftDown(_ start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < heap.count && heap[left].at < heap[smallest].at { smallest = left }
            if right < heap.count && heap[right].at < heap[smallest].at { smallest = right }
            if smallest == parent { return }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
    }

    /// Drops cancelled entries and rebuilds the heap (amortised: runs when more
    /// than half the entries are cancelled). The armed time stays valid: it is
    /// at or before every remaining entry.
    private func compact() {
        heap.removeAll { actions[$0.id] == nil }
        var index = heap.count / 2
        while index > 0 {
            index -= 1
            siftDown(index)
        }
    }
}
