import CLinux
import DequeModule
import Foundation
import Logging
import Primitives
import RunLoopCore
import RunLoopStore
import Synchronization

/// A store that fails and comes back: the writer's warning and status, the
/// outage's start, and reads that end the writer's back-off.
extension HistoryRecorder {
    // Only the writer thread calls `failed` and `recovered`. Each changes the
    // warning before the status, so whoever sees `/api/store` down (or up again)
    // already finds the warning raised (or resolved).

    func failed(_ error: any Error) {
        let message = "\(error)"
        let first = state.withLock { $0.status.up || $0.status.lastError == nil }
        if first {
            logger.warning("history store failing", metadata: ["store": "\(store.kind)", "error": "\(message)"])
        }
        warnings.raise(
            .storeUnavailable, severity: "warning", thread: "", subjects: [store.kind],
            message:
                "the \(store.kind) history store fails (\(message)); events are queued (up to \(options.queueCapacity)) and written when it answers again",
            details: ["store": .string(store.kind), "location": .string(store.location), "error": .string(message)],
            counts: first)
        let refusal = (error as? StoreError)?.configuration == true ? message : nil
        let beat = options.heartbeatInterval
        state.withLock { s in
            if s.status.up || s.status.lastError == nil {
                s.status.outage = (Self.outageStart(s.status, now: Date().timeIntervalSince1970, beat: beat), nil)
            }
            s.status.up = false
            s.status.lastError = message
            s.status.refusal = refusal
        }
    }

    /// When an outage that is noticed `now` began, as far as this process
    /// can tell: when the store last answered it (its last commit, or the
    /// end of the outage before, whichever is later), at most one heartbeat
    /// interval back (an idle SQLite runloopd commits nothing for hours).
    /// The store may have stopped answering any time after that answer, so
    /// an instance whose last heartbeat came just before this process's
    /// failed try does not have that gap counted as silence against it.
    static func outageStart(_ status: Status, now: Double, beat: Double) -> Double {
        let answered = [status.lastCommitAt, status.outage?.to].compactMap { $0 }.max() ?? now
        return min(now, max(answered, now - beat))
    }

    func recovered() {
        let was = state.withLock { $0.status.lastError != nil }
        if was {
            logger.info("history store answers again", metadata: ["store": "\(store.kind)"])
            warnings.resolve(.storeUnavailable, thread: "")
        }
        state.withLock { s in
            if s.status.lastError != nil, let from = s.status.outage?.from {
                s.status.outage = (from, Date().timeIntervalSince1970)
            }
            s.status.up = true
            s.status.lastError = nil
            s.status.refusal = nil
        }
    }

    /// Runs a read of the store (on the readers' queue). A read the store
    /// answers while the writer backs off after a failure wakes the writer
    /// (`storeAnswered`).
    func reading<T>(_ body: (any HistoryStore) throws -> T) rethrows -> T {
        let result = try body(store)
        storeAnswered()
        return result
    }

    /// The store answered a read (any thread but the writer's). While the
    /// writer is failing, it tries again now instead of at the end of its
    /// back-off (up to `longestBackoff`): the store answers this process, so
    /// its outage ends, and its heartbeat resumes, at the next commit. Until
    /// then silence counts against no other instance (fleet health) and this
    /// one's own heartbeat is not written, so a judge that only read would
    /// keep excusing a dead instance for a back-off or more after the store
    /// came back. The writer still waits `shortestBackoff` after each failed
    /// try (a store that answers reads but refuses writes is tried at most
    /// that often).
    func storeAnswered() {
        let wake = state.withLock { s -> Bool in
            guard !s.status.up, s.status.lastError != nil, !s.retryNow else { return false }
            s.retryNow = true
            return true
        }
        if wake { state.notifyAll() }
    }

    /// Why the store refuses this instance's configuration, while it does (`/readyz` says it).
    var refusal: String? { state.withLock { $0.status.refusal } }
}
