import Dispatch
import HeapModule

/// A deadline scheduled with `Deadlines.after`; `cancel()` drops its action at once.
public struct DeadlineToken: Sendable, Hashable {
    let id: UInt64

    /// Drops the action (and what it captured) if it has not run yet.
    public func cancel() {
        Deadlines.shared.cancel(id)
    }
}

/// Cancellable deadlines on one dispatch timer: the "answer if nothing else
/// answered within N s" guards of long requests.
///
/// `DispatchQueue.asyncAfter` cannot be cancelled, so every fast answer would
/// leave its guard (and what it captured) queued until the deadline. Here a
/// cancelled deadline releases its action immediately; the heap keeps only
/// (time, id) pairs and is rebuilt when most of them are cancelled.
///
/// Thread-safety: `after` and `cancel` from any thread; actions run on a
/// private serial queue; the table and heap are guarded by one `Locked`,
/// which holds no call into libdispatch. (`@unchecked`: the dispatch timer is
/// not marked Sendable; it is armed only on the private serial queue, where
/// it also fires.)
public final class Deadlines: @unchecked Sendable {
    /// The process-wide scheduler.
    public static let shared = Deadlines()

    private struct Entry: Comparable {
        var at: UInt64
        var id: UInt64
        static func < (a: Entry, b: Entry) -> Bool { a.at < b.at || (a.at == b.at && a.id < b.id) }
    }

    private struct State {
        var heap = Heap<Entry>()
        var actions: [UInt64: @Sendable () -> Void] = [:]
        var nextId: UInt64 = 0
        /// The uptime (ns) the timer is set for, or is about to be set for by
        /// a `fireDue` queued on `queue`; `UInt64.max` when unarmed.
        var armedAt = UInt64.max
    }

    private let state = Locked(State())
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

    /// Arms the timer once, so libdispatch sets up its timer machinery (an
    /// epoll set, an eventfd and a timerfd, kept for the process's life) now,
    /// at start, rather than inside the first request that has a deadline.
    public static func prepare() {
        let shared = shared
        shared.queue.sync {
            // On the queue, like every arming: a deadline scheduled meanwhile
            // queues its `fireDue` behind this and re-arms for its own time.
            if shared.state.withLock({ $0.armedAt == UInt64.max }) {
                shared.timer.schedule(deadline: .now() + .seconds(3600), leeway: .milliseconds(1))
            }
        }
    }

    /// Deadlines scheduled and not yet run or cancelled (for tests and leak checks).
    public var pendingCount: Int { state.withLock { $0.actions.count } }

    private func schedule(_ seconds: Double, _ action: @escaping @Sendable () -> Void) -> DeadlineToken {
        let delay = seconds.isFinite ? max(0, min(seconds, 1e7)) : 1e7
        let at = DispatchTime.now().uptimeNanoseconds &+ UInt64(delay * 1e9)
        let (id, rearm) = state.withLock { s -> (UInt64, Bool) in
            s.nextId &+= 1
            s.actions[s.nextId] = action
            s.heap.insert(Entry(at: at, id: s.nextId))
            guard at < s.armedAt else { return (s.nextId, false) }
            s.armedAt = at
            return (s.nextId, true)
        }
        // The timer is armed only on the serial queue, by `fireDue`, from the
        // earliest entry it finds then: a re-arm for a later time queued or
        // running before this one cannot overtake it (this one runs after).
        if rearm { queue.async { [self] in fireDue() } }
        return DeadlineToken(id: id)
    }

    fileprivate func cancel(_ id: UInt64) {
        let removed = state.withLock { s in
            let removed = s.actions.removeValue(forKey: id)
            if s.heap.count > 64 && s.heap.count > 2 * s.actions.count {
                // Amortised: rebuilt only when most entries are cancelled. The armed
                // time stays valid: it is at or before every remaining entry.
                let live = s.actions
                s.heap = Heap(s.heap.unordered.filter { live[$0.id] != nil })
            }
            return removed
        }
        _ = removed  // released here, outside the lock
    }

    /// Timer handler, and re-arm after an earlier deadline came (on `queue`):
    /// runs every due action, arms the timer for the next.
    private func fireDue() {
        let (due, armAt): ([@Sendable () -> Void], UInt64) = state.withLock { s in
            var due: [@Sendable () -> Void] = []
            let now = DispatchTime.now().uptimeNanoseconds
            while let top = s.heap.min, top.at <= now {
                s.heap.removeMin()
                if let action = s.actions.removeValue(forKey: top.id) { due.append(action) }
            }
            while let top = s.heap.min, s.actions[top.id] == nil { s.heap.removeMin() }
            s.armedAt = s.heap.min?.at ?? UInt64.max
            return (due, s.armedAt)
        }
        if armAt != UInt64.max {
            timer.schedule(deadline: DispatchTime(uptimeNanoseconds: armAt), leeway: .milliseconds(1))
        }
        for action in due { action() }
    }
}
