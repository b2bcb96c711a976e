import Dispatch
import Primitives

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Bounds how long a client may take over one request, and keeps connections
/// that are only reading (or idle between requests) from filling the
/// connection table, so slow or idle clients cannot hold the server's
/// connections (a slow-header, slow-body or keep-alive trickle attack).
///
/// libmicrohttpd only has an idle timeout: a client that sends one byte every
/// few seconds keeps its connection forever, and enough of them (from many
/// source addresses, past the per-address limit) fill the connection limit so
/// that nobody else, `/healthz` included, gets in. Here a connection is
/// *pending* from its accept, or on a kept-alive connection from the end of
/// its previous answer (nginx's `keepalive_timeout` and
/// `client_header_timeout` in one clock), until its next request, headers and
/// body, is complete and handed to the handler. Three rules:
/// - **A deadline** (`--request-deadline`, 10 s): a connection pending
///   longer is shut down.
/// - **A cap** (`--max-pending-requests`, 256): when more connections are
///   pending, the oldest ones pending for over a second are shut down, at
///   the next accept or by the timer (a client that sends its request at
///   once is never pending that long). A flood that fills the connection
///   limit at once is thus cut back to the cap a second later.
/// - **Headroom** (`--connection-headroom`, 32): while the open connections
///   pass the connection limit minus the headroom, connections pending for at
///   least `headroomGrace` (0.5 s) are shut down, the oldest of the address
///   that has the most pending first, at each accept and by the timer. So the
///   table is held full by connections that only read or idle for at most
///   half a second (plus the timer's leeway), and a client that sends its
///   request at once is never shut down for headroom, whoever else is
///   connecting, even when its one connection makes its address the busiest.
///
/// Shutting down is `shutdown(2)` on the connection's socket; libmicrohttpd
/// then sees the socket end and closes the connection itself. The socket is
/// shut down under the lock, and libmicrohttpd tells `closed` (which takes the
/// lock) before it closes a socket, so a shut-down descriptor is never one
/// that was closed and reused.
///
/// Threads: `started`, `requestLine`, `received`, `answered` and `closed` on
/// libmicrohttpd's threads; the timer is set and fires only on its own serial
/// queue. One `Locked`, under which only table work and `shutdown(2)` happen
/// (no call-out; it takes no other lock).
final class RequestDeadlines: @unchecked Sendable {
    // @unchecked: the dispatch timer is not marked Sendable; it is set and
    // fires only on the private serial queue.

    /// A peer's address as a hashable value (IPv4 mapped into the low bytes).
    struct AddressKey: Hashable {
        var high: UInt64
        var low: UInt64

        static let unknown = AddressKey(high: .max, low: .max)

        /// The key of a peer's `sockaddr` (IPv4 or IPv6), `unknown` otherwise.
        init(_ address: UnsafePointer<sockaddr>?) {
            guard let address else {
                self = .unknown
                return
            }
            switch Int32(address.pointee.sa_family) {
            case AF_INET:
                let raw = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr.s_addr }
                self.init(high: 0, low: UInt64(raw))
            case AF_INET6:
                let bytes = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_addr }
                let (high, low) = withUnsafeBytes(of: bytes) { raw in
                    (
                        raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self),
                        raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self)
                    )
                }
                self.init(high: high | 1, low: low)
            default:
                self = .unknown
            }
        }

        init(high: UInt64, low: UInt64) {
            self.high = high
            self.low = low
        }
    }

    private struct Open {
        var fd: Int32
        var address: AddressKey
        /// Shut down by a budget, not yet closed by libmicrohttpd.
        var isShut = false
    }

    private struct Pending {
        var fd: Int32
        var since: UInt64
        var address: AddressKey
        /// The query parameters of a request line whose query was cut off (0: not cut).
        var cutQuery: UInt32 = 0
    }

    private struct State {
        /// Every open connection (from its accept to its close).
        var open: [UInt: Open] = [:]
        /// Open connections shut down and not yet closed (they are leaving the table).
        var shutOpen = 0
        var pending: [UInt: Pending] = [:]
        /// Pending connections per address (only addresses with some).
        var pendingByAddress: [AddressKey: Int] = [:]
        /// When the timer should fire (uptime ns); `UInt64.max` when nothing is due.
        var armedAt = UInt64.max
        var expired = 0
        var evicted = 0
        var crowded = 0
        /// Pending connections in the order they became pending (the oldest
        /// first): an entry whose connection left `pending` since, or became
        /// pending again later, is stale and skipped. The oldest is found in
        /// O(1) amortized, so the cap costs nothing per accept under a flood.
        var order: [(key: UInt, since: UInt64)] = []
        var orderHead = 0

        /// The oldest pending connection, dropping stale entries on the way.
        mutating func oldest() -> (key: UInt, since: UInt64)? {
            while orderHead < order.count {
                let entry = order[orderHead]
                if pending[entry.key]?.since == entry.since { return entry }
                orderHead += 1
            }
            order.removeAll(keepingCapacity: true)
            orderHead = 0
            return nil
        }

        mutating func removePending(_ key: UInt) -> Pending? {
            guard let entry = pending.removeValue(forKey: key) else { return nil }
            let left = (pendingByAddress[entry.address] ?? 1) - 1
            pendingByAddress[entry.address] = left > 0 ? left : nil
            return entry
        }

        mutating func insertPending(_ key: UInt, _ entry: Pending) {
            pending[key] = entry
            pendingByAddress[entry.address, default: 0] += 1
            if orderHead > 1024 && orderHead * 2 > order.count {
                order.removeFirst(orderHead)
                orderHead = 0
            }
            order.append((key, entry.since))
        }

        /// Shuts down a pending connection's socket and forgets it.
        mutating func shut(_ key: UInt) {
            guard let entry = removePending(key) else { return }
            if open[key]?.isShut == false {
                open[key]?.isShut = true
                shutOpen += 1
            }
            shutdown(entry.fd, Int32(SHUT_RDWR))
        }

        /// Brings the timer forward to `due`: true when it must be set again
        /// (on the timer's queue, after the lock).
        mutating func arm(at due: UInt64) -> Bool {
            guard due < armedAt else { return false }
            armedAt = due
            return true
        }

        /// Open connections that are staying (not shut down).
        var staying: Int { open.count - shutOpen }

        /// The connection the headroom sheds at `now`: of those pending for at
        /// least `grace`, the oldest of the address with the most pending.
        func headroomVictim(now: UInt64, grace: UInt64) -> UInt? {
            var best: (key: UInt, load: Int, since: UInt64)?
            for (key, entry) in pending where now &- entry.since >= grace {
                let load = pendingByAddress[entry.address] ?? 0
                if let b = best, b.load > load || (b.load == load && b.since <= entry.since) { continue }
                best = (key, load, entry.since)
            }
            return best?.key
        }
    }

    typealias Counts = HTTPConnectionCounts

    private let deadline: UInt64
    private let cap: Int
    /// Open connections past which each accept sheds a pending connection.
    private let crowdedAt: Int
    /// How long a connection must have been pending before the cap may evict it.
    private static let evictableAfter: UInt64 = 1_000_000_000
    /// How long a connection must have been pending before the headroom may
    /// shed it: a client that sends its request at once is never shed.
    static let headroomGrace: UInt64 = 500_000_000
    /// The clock (uptime ns); a test's own clock in unit tests.
    private let clock: @Sendable () -> UInt64
    private let state = Locked(State())
    private let queue = DispatchQueue(label: "runloopd.request-deadlines")
    private let timer: any DispatchSourceTimer

    /// - Parameters:
    ///   - seconds: The request deadline.
    ///   - cap: The most connections pending before the oldest is evicted.
    ///   - connectionLimit: The connection table's size.
    ///   - headroom: Connections kept free of pending ones in that table (at most half of it).
    ///   - clock: The clock in nanoseconds (uptime; a test gives its own).
    init(
        seconds: Double, cap: Int, connectionLimit: Int = Int.max, headroom: Int = 0,
        clock: @escaping @Sendable () -> UInt64 = { DispatchTime.now().uptimeNanoseconds }
    ) {
        self.clock = clock
        deadline = UInt64(max(0.001, seconds) * 1e9)
        self.cap = max(1, cap)
        // At most half the table is headroom (a small --max-connections keeps room to work).
        crowdedAt =
            connectionLimit == Int.max
            ? Int.max : max(1, connectionLimit - min(max(0, headroom), connectionLimit / 2))
        timer = DispatchSource.makeTimerSource(queue: queue)
        timer.setEventHandler { [weak self] in self?.fire() }
        timer.activate()
    }

    deinit {
        timer.cancel()
    }

    var counts: Counts {
        state.withLock {
            Counts(
                expired: $0.expired, evicted: $0.evicted, crowded: $0.crowded, pending: $0.pending.count,
                open: $0.open.count)
        }
    }

    private static func key(_ connection: OpaquePointer) -> UInt {
        UInt(bitPattern: Int(bitPattern: connection))
    }

    /// A connection was accepted from `address`. Past the crowding point,
    /// connections pending for over `headroomGrace` are shut down (the
    /// busiest address's oldest first); if none has been pending that long
    /// yet, the timer comes back when the first has.
    func started(_ connection: OpaquePointer, fd: Int32, address: AddressKey = .unknown) {
        guard fd >= 0 else { return }
        let key = Self.key(connection)
        let now = clock()
        let rearm: Bool = state.withLock { s in
            s.open[key] = Open(fd: fd, address: address)
            guard let due = shedForHeadroom(&s, now: now) else { return false }
            return s.arm(at: due)
        }
        if rearm { queue.async { [weak self] in self?.setTimer() } }
        add(connection, cutQuery: 0)
    }

    /// Shuts down connections pending for over `headroomGrace` (the busiest
    /// address's oldest first) while the staying connections pass the
    /// crowding point. Returns when to come back if the table is still
    /// crowded and a pending connection will have waited long enough then.
    private func shedForHeadroom(_ s: inout State, now: UInt64) -> UInt64? {
        while s.staying > crowdedAt, let victim = s.headroomVictim(now: now, grace: Self.headroomGrace) {
            s.shut(victim)
            s.crowded += 1
        }
        guard s.staying > crowdedAt, let oldest = s.oldest() else { return nil }
        return oldest.since &+ Self.headroomGrace
    }

    /// A request line was read (on a kept-alive connection the request has
    /// been pending since the previous answer); `cutQuery` is how many query
    /// parameters it had when they were too many and cut off (0 otherwise).
    func requestLine(_ connection: OpaquePointer, fd: Int32, cutQuery: UInt32) {
        add(connection, cutQuery: cutQuery)
    }

    /// A request's answer was sent whole: a kept-alive connection's next
    /// request is pending from now (a closing one is `closed` next).
    func answered(_ connection: OpaquePointer) {
        add(connection, cutQuery: 0)
    }

    /// The request is complete (headers and body): no longer pending. Returns
    /// how many query parameters its request line had if they were cut off.
    @discardableResult
    func received(_ connection: OpaquePointer) -> UInt32 {
        let key = Self.key(connection)
        return state.withLock { $0.removePending(key)?.cutQuery ?? 0 }
    }

    /// libmicrohttpd is about to close the connection's socket.
    func closed(_ connection: OpaquePointer) {
        let key = Self.key(connection)
        state.withLock { s in
            _ = s.removePending(key)
            if s.open.removeValue(forKey: key)?.isShut == true { s.shutOpen -= 1 }
        }
    }

    private func add(_ connection: OpaquePointer, cutQuery: UInt32) {
        let key = Self.key(connection)
        let now = clock()
        let rearm: Bool = state.withLock { s in
            if s.pending[key] != nil {
                if cutQuery > 0 { s.pending[key]?.cutQuery = cutQuery }
                return false
            }
            // Only an open connection (its accept seen, its close not yet) is tracked.
            guard let open = s.open[key] else { return false }
            s.insertPending(key, Pending(fd: open.fd, since: now, address: open.address, cutQuery: cutQuery))
            var due = s.armedAt == UInt64.max ? now &+ deadline : UInt64.max
            if s.pending.count > cap {
                // Over the cap (an attack, or a burst): evict now if the oldest may
                // go, else as soon as it may (a full connection table accepts
                // nobody, so the timer must do it, not the next accept).
                evict(&s, now: now)
                if s.pending.count > cap, let oldest = s.oldest() {
                    due = min(due, oldest.since &+ Self.evictableAfter)
                }
            }
            return s.arm(at: due)
        }
        // The timer is set only on its own queue (no dispatch call under the lock);
        // each setting reads the latest due time, so none overtakes another.
        if rearm { queue.async { [weak self] in self?.setTimer() } }
    }

    /// Shuts down the oldest connections pending for over a second until at most `cap` are pending.
    private func evict(_ s: inout State, now: UInt64) {
        while s.pending.count > cap, let oldest = s.oldest(), now &- oldest.since >= Self.evictableAfter {
            s.shut(oldest.key)
            s.evicted += 1
        }
    }

    /// Sets the timer to the latest due time (on `queue`).
    private func setTimer() {
        let at = state.withLock { $0.armedAt }
        guard at != UInt64.max else { return }
        timer.schedule(deadline: DispatchTime(uptimeNanoseconds: at), leeway: .milliseconds(50))
    }

    /// Shuts down every connection past its deadline, evicts down to the
    /// cap and sheds for headroom; sets the timer for what is due next (on `queue`).
    private func fire() {
        let next = expire(at: clock())
        if next != UInt64.max {
            timer.schedule(deadline: DispatchTime(uptimeNanoseconds: next), leeway: .milliseconds(50))
        }
    }

    /// The timer's work at `now` (a unit test calls it with its own clock):
    /// returns when it is due next (`UInt64.max`: nothing pending).
    func expire(at now: UInt64) -> UInt64 {
        state.withLock { s in
            while let oldest = s.oldest(), now &- oldest.since >= deadline {
                s.shut(oldest.key)
                s.expired += 1
            }
            evict(&s, now: now)
            let headroomDue = shedForHeadroom(&s, now: now)
            guard let oldest = s.oldest()?.since else {
                s.armedAt = UInt64.max
                return UInt64.max
            }
            var due = oldest &+ deadline
            if s.pending.count > cap { due = min(due, oldest &+ Self.evictableAfter) }
            if let headroomDue { due = min(due, headroomDue) }
            s.armedAt = max(due, now &+ 1_000_000)
            return s.armedAt
        }
    }
}
