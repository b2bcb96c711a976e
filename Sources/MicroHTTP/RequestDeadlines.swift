import Dispatch
import Primitives

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Bounds how long a client may take to send a request, so slow senders
/// cannot hold the server's connections (a slow-header or slow-body attack).
///
/// libmicrohttpd only has an idle timeout: a client that sends one header
/// line every few seconds keeps its connection forever, and enough of them
/// (from many source addresses, past the per-address limit) fill the
/// connection limit so that nobody else, `/healthz` included, gets in.
/// Here a connection is *pending* from its accept (or, on a kept-alive
/// connection, from its next request line) until its request, headers and
/// body, is complete and handed to the handler. Two rules:
/// - **A deadline** (`--request-deadline`, 10 s): a connection pending
///   longer is shut down.
/// - **A cap** (`--max-pending-requests`, 256): when more connections are
///   pending, the oldest ones pending for over a second are shut down, at
///   the next accept or by the timer (a client that sends its request at
///   once is never pending that long). A flood that fills the connection
///   limit at once is thus cut back to the cap a second later.
///
/// Shutting down is `shutdown(2)` on the connection's socket; libmicrohttpd
/// then sees the socket end and closes the connection itself. The socket is
/// shut down under the lock, and libmicrohttpd tells `closed` (which takes the
/// lock) before it closes a socket, so a shut-down descriptor is never one
/// that was closed and reused.
///
/// Threads: `started`, `requestLine`, `received` and `closed` on
/// libmicrohttpd's threads; the timer is set and fires only on its own serial
/// queue. One `Locked`, under which only table work and `shutdown(2)` happen
/// (no call-out; it takes no other lock).
final class RequestDeadlines: @unchecked Sendable {
    // @unchecked: the dispatch timer is not marked Sendable; it is set and
    // fires only on the private serial queue.

    private struct Pending {
        var fd: Int32
        var since: UInt64
        /// The query parameters of a request line whose query was cut off (0: not cut).
        var cutQuery: UInt32 = 0
    }

    private struct State {
        var pending: [UInt: Pending] = [:]
        /// When the timer should fire (uptime ns); `UInt64.max` when nothing is due.
        var armedAt = UInt64.max
        var expired = 0
        var evicted = 0
    }

    /// Counters since start.
    struct Counts: Equatable {
        /// Connections shut down for passing the deadline.
        var expired: Int
        /// Connections shut down to keep the pending ones within the cap.
        var evicted: Int
        /// Connections pending now.
        var pending: Int
    }

    private let deadline: UInt64
    private let cap: Int
    /// How long a connection must have been pending before the cap may evict it.
    private static let evictableAfter: UInt64 = 1_000_000_000
    private let state = Locked(State())
    private let queue = DispatchQueue(label: "runloopd.request-deadlines")
    private let timer: any DispatchSourceTimer

    /// - Parameters:
    ///   - seconds: The request deadline.
    ///   - cap: The most connections pending before the oldest is evicted.
    init(seconds: Double, cap: Int) {
        deadline = UInt64(max(0.001, seconds) * 1e9)
        self.cap = max(1, cap)
        timer = DispatchSource.makeTimerSource(queue: queue)
        timer.setEventHandler { [weak self] in self?.fire() }
        timer.activate()
    }

    deinit {
        timer.cancel()
    }

    var counts: Counts {
        state.withLock { Counts(expired: $0.expired, evicted: $0.evicted, pending: $0.pending.count) }
    }

    /// A connection was accepted.
    func started(_ connection: OpaquePointer, fd: Int32) {
        add(connection, fd: fd, cutQuery: 0)
    }

    /// A request line was read (a kept-alive connection's next request starts
    /// pending here); `cutQuery` is how many query parameters it had when they
    /// were too many and cut off (0 otherwise).
    func requestLine(_ connection: OpaquePointer, fd: Int32, cutQuery: UInt32) {
        add(connection, fd: fd, cutQuery: cutQuery)
    }

    /// The request is complete (headers and body): no longer pending. Returns
    /// how many query parameters its request line had if they were cut off.
    @discardableResult
    func received(_ connection: OpaquePointer) -> UInt32 {
        let key = UInt(bitPattern: Int(bitPattern: connection))
        return state.withLock { $0.pending.removeValue(forKey: key)?.cutQuery ?? 0 }
    }

    /// libmicrohttpd is about to close the connection's socket.
    func closed(_ connection: OpaquePointer) {
        received(connection)
    }

    private func add(_ connection: OpaquePointer, fd: Int32, cutQuery: UInt32) {
        guard fd >= 0 else { return }
        let key = UInt(bitPattern: Int(bitPattern: connection))
        let now = DispatchTime.now().uptimeNanoseconds
        let rearm: Bool = state.withLock { s in
            if s.pending[key] != nil {
                if cutQuery > 0 { s.pending[key]?.cutQuery = cutQuery }
                return false
            }
            s.pending[key] = Pending(fd: fd, since: now, cutQuery: cutQuery)
            var due = s.armedAt == UInt64.max ? now &+ deadline : UInt64.max
            if s.pending.count > cap {
                // Over the cap (an attack, or a burst): evict now if the oldest may
                // go, else as soon as it may (a full connection table accepts
                // nobody, so the timer must do it, not the next accept).
                evict(&s, now: now)
                if s.pending.count > cap, let oldest = s.pending.values.map(\.since).min() {
                    due = min(due, oldest &+ Self.evictableAfter)
                }
            }
            guard due < s.armedAt else { return false }
            s.armedAt = due
            return true
        }
        // The timer is set only on its own queue (no dispatch call under the lock);
        // each setting reads the latest due time, so none overtakes another.
        if rearm { queue.async { [weak self] in self?.setTimer() } }
    }

    /// Shuts down the oldest connections pending for over a second until at most `cap` are pending.
    private func evict(_ s: inout State, now: UInt64) {
        let excess = s.pending.count - cap
        guard excess > 0 else { return }
        let oldest = s.pending.sorted { $0.value.since < $1.value.since }.prefix(excess)
        for (key, entry) in oldest where now &- entry.since >= Self.evictableAfter {
            shutdown(entry.fd, Int32(SHUT_RDWR))
            s.pending.removeValue(forKey: key)
            s.evicted += 1
        }
    }

    /// Sets the timer to the latest due time (on `queue`).
    private func setTimer() {
        let at = state.withLock { $0.armedAt }
        guard at != UInt64.max else { return }
        timer.schedule(deadline: DispatchTime(uptimeNanoseconds: at), leeway: .milliseconds(50))
    }

    /// Shuts down every connection past its deadline and evicts down to the
    /// cap; sets the timer for what is due next (on `queue`).
    private func fire() {
        let now = DispatchTime.now().uptimeNanoseconds
        let next: UInt64 = state.withLock { s in
            for (key, entry) in s.pending where now &- entry.since >= deadline {
                shutdown(entry.fd, Int32(SHUT_RDWR))
                s.pending.removeValue(forKey: key)
                s.expired += 1
            }
            evict(&s, now: now)
            guard let oldest = s.pending.values.map(\.since).min() else {
                s.armedAt = UInt64.max
                return UInt64.max
            }
            var due = oldest &+ deadline
            if s.pending.count > cap { due = min(due, oldest &+ Self.evictableAfter) }
            s.armedAt = max(due, now &+ 1_000_000)
            return s.armedAt
        }
        if next != UInt64.max {
            timer.schedule(deadline: DispatchTime(uptimeNanoseconds: next), leeway: .milliseconds(50))
        }
    }
}
