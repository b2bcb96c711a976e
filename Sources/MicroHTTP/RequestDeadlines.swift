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
///   pending, the oldest one pending for over a second is shut down (a
///   client that sends its request at once is never pending that long).
///
/// Shutting down is `shutdown(2)` on the connection's socket; libmicrohttpd
/// then sees the socket end and closes the connection itself. The socket is
/// shut down under the lock, and libmicrohttpd tells `closed` (which takes the
/// lock) before it closes a socket, so a shut-down descriptor is never one
/// that was closed and reused.
///
/// Threads: `started`, `requestLine`, `received` and `closed` on
/// libmicrohttpd's threads; the deadline timer on its own serial queue. One
/// `Locked`, under which only table work, `shutdown(2)` and re-arming the
/// timer happen (no call-out; it takes no other lock).
final class RequestDeadlines: @unchecked Sendable {
    // @unchecked: the dispatch timer is not marked Sendable; it is re-armed
    // only under the lock and fires on the private serial queue.

    private struct Pending {
        var fd: Int32
        var since: UInt64
        /// The query parameters of a request line whose query was cut off (0: not cut).
        var cutQuery: UInt32 = 0
    }

    private struct State {
        var pending: [UInt: Pending] = [:]
        /// Whether the timer is set (for the oldest pending connection's deadline).
        var armed = false
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
        state.withLock { s in
            if s.pending[key] != nil {
                if cutQuery > 0 { s.pending[key]?.cutQuery = cutQuery }
                return
            }
            s.pending[key] = Pending(fd: fd, since: now, cutQuery: cutQuery)
            if s.pending.count > cap, let oldest = s.pending.min(by: { $0.value.since < $1.value.since }),
                now &- oldest.value.since >= Self.evictableAfter
            {
                shutdown(oldest.value.fd, Int32(SHUT_RDWR))
                s.pending.removeValue(forKey: oldest.key)
                s.evicted += 1
            }
            if !s.armed {
                s.armed = true
                // Under the lock: a concurrent re-arm cannot overtake this one.
                timer.schedule(deadline: DispatchTime(uptimeNanoseconds: now &+ deadline), leeway: .milliseconds(100))
            }
        }
    }

    /// Shuts down every connection past its deadline; re-arms for the next one.
    private func fire() {
        let now = DispatchTime.now().uptimeNanoseconds
        state.withLock { s in
            var oldest = UInt64.max
            for (key, entry) in s.pending {
                if now &- entry.since >= deadline {
                    shutdown(entry.fd, Int32(SHUT_RDWR))
                    s.pending.removeValue(forKey: key)
                    s.expired += 1
                } else {
                    oldest = min(oldest, entry.since)
                }
            }
            if oldest == UInt64.max {
                s.armed = false
            } else {
                timer.schedule(
                    deadline: DispatchTime(uptimeNanoseconds: oldest &+ deadline), leeway: .milliseconds(100))
            }
        }
    }
}
