import Dispatch
import Foundation
import Primitives
import RunLoopTestSupport
import Testing

@testable import MicroHTTP

#if canImport(Glibc)
    import Glibc
#endif

/// The connection budgets of `RequestDeadlines` on a clock the test moves:
/// real sockets (socket pairs, whose far end sees the shutdown), fake
/// libmicrohttpd connections. The wire-level attacks are in
/// Tests/hardening/test_03_load.py and test_10_http_budgets.py.
@Suite("Request deadlines: the headroom")
struct RequestDeadlinesTests {
    /// A clock the test moves; it starts an hour ahead of the real uptime so
    /// that the real timer, set from it, is never due while the test runs.
    final class Clock: Sendable {
        let ns = Locked(DispatchTime.now().uptimeNanoseconds + 3_600_000_000_000)
        var now: UInt64 { ns.withLock { $0 } }
        func advance(seconds: Double) { ns.withLock { $0 += UInt64(seconds * 1e9) } }
    }

    /// One connection: a socket pair's near end (given to the table) and far end (the client).
    final class Connection {
        let key: OpaquePointer
        let near: Int32
        let far: Int32
        let address: RequestDeadlines.AddressKey

        init(_ n: Int, address: UInt64) throws {
            var fds: [Int32] = [0, 0]
            try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
            near = fds[0]
            far = fds[1]
            key = try #require(OpaquePointer(bitPattern: UInt(0x1000 + n * 16)))
            self.address = RequestDeadlines.AddressKey(high: 0, low: address)
        }

        /// Whether the table shut the near end down (the far end reads its end).
        var wasShut: Bool {
            var byte: UInt8 = 0
            return recv(far, &byte, 1, Int32(MSG_DONTWAIT)) == 0
        }

        deinit {
            close(near)
            close(far)
        }
    }

    private static let grace = Double(RequestDeadlines.headroomGrace) / 1e9

    @Test("a quiet client's connection, accepted a moment before, is never shed when a flood's accept crowds the table")
    func quietClientSurvivesAFlood() throws {
        let clock = Clock()
        // A table of 8 with a headroom of 4: crowded past 4 staying.
        let table = RequestDeadlines(seconds: 10, cap: 256, connectionLimit: 8, headroom: 4, clock: { clock.now })
        let flood = try (0..<4).map { try Connection($0, address: 1) }
        for c in flood {
            table.started(c.key, fd: c.near, address: c.address)
            table.received(c.key)  // each sends its request at once: being answered, not pending
        }
        let quiet = try Connection(10, address: 2)
        table.started(quiet.key, fd: quiet.near, address: quiet.address)
        // The flood's next accept crowds the table; the quiet client's request
        // is the only one pending, and its address the busiest (the CI failure).
        clock.advance(seconds: 0.005)
        let next = try Connection(5, address: 1)
        table.started(next.key, fd: next.near, address: next.address)
        #expect(!quiet.wasShut)
        #expect(table.counts.crowded == 0)
        #expect(table.received(quiet.key) == 0)
        #expect(table.counts.pending == 1)  // only the flood's latest
    }

    @Test("past the grace, the busiest address's oldest go first, down to the headroom; the quiet one stays")
    func busiestOldestFirst() throws {
        let clock = Clock()
        let table = RequestDeadlines(seconds: 10, cap: 256, connectionLimit: 8, headroom: 4, clock: { clock.now })
        var busy: [Connection] = []
        for n in 0..<4 {
            busy.append(try Connection(n, address: 1))
            table.started(busy[n].key, fd: busy[n].near, address: busy[n].address)
            clock.advance(seconds: 0.01)
        }
        let quiet = try Connection(10, address: 2)
        table.started(quiet.key, fd: quiet.near, address: quiet.address)
        clock.advance(seconds: 0.1)
        for n in 4..<7 {
            busy.append(try Connection(n, address: 1))
            table.started(busy[n].key, fd: busy[n].near, address: busy[n].address)
        }
        // 8 staying, none pending for the grace yet: nothing is shed, and the
        // timer comes back when the oldest has waited the grace.
        #expect(busy.allSatisfy { !$0.wasShut } && !quiet.wasShut)
        let due = table.expire(at: clock.now)
        let oldestSince = clock.now - UInt64(0.14 * 1e9)
        #expect(due == oldestSince + RequestDeadlines.headroomGrace)
        // The grace passed: four of the busy address (its oldest) are shed, so 4 stay.
        clock.advance(seconds: Self.grace)
        _ = table.expire(at: clock.now)
        #expect(busy[0..<4].allSatisfy { $0.wasShut })
        #expect(busy[4...].allSatisfy { !$0.wasShut })
        #expect(!quiet.wasShut)
        #expect(table.counts.crowded == 4)
        // Shut connections are leaving the table: none more is shed for them.
        _ = table.expire(at: clock.now + 1)
        #expect(table.counts.crowded == 4)
        for c in busy[0..<4] { table.closed(c.key) }
        #expect(table.counts.open == 4)
    }

    @Test(
        "random accepts, requests, answers, closes: only connections pending past the grace are shed, to the mark (seed printed)"
    )
    func randomTraffic() throws {
        let seed = SplitMix.seed("DEADLINES_SEED", test: "RequestDeadlinesTests.randomTraffic")
        var rng = SplitMix(seed)
        var shedInAll = 0
        for round in 0..<20 {
            let limit = 4 + Int(rng.next() % 20)
            let headroom = Int(rng.next() % UInt64(limit))
            let crowdedAt = max(1, limit - min(headroom, limit / 2))
            let clock = Clock()
            let table = RequestDeadlines(
                seconds: 1_000, cap: 100_000, connectionLimit: limit, headroom: headroom, clock: { clock.now })
            // The model: each open connection, when it became pending (nil: being answered), whether shut.
            var open: [(c: Connection, since: UInt64?, shut: Bool)] = []
            var made = 0
            var shedSeen = 0
            for step in 0..<300 {
                let context = "seed \(seed), round \(round), step \(step)"
                let now = clock.now
                var accepted: Int?
                var expired = false
                switch rng.next() % 10 {
                case 0, 1, 2:  // an accept (libmicrohttpd accepts up to its limit)
                    guard open.count < limit else { break }
                    let c = try Connection(made, address: rng.next() % 4)
                    made += 1
                    table.started(c.key, fd: c.near, address: c.address)
                    open.append((c, now, false))
                    accepted = open.count - 1
                case 3, 4:  // a request complete
                    guard let i = open.indices.randomElement(using: &rng), open[i].since != nil, !open[i].shut
                    else { break }
                    table.received(open[i].c.key)
                    open[i].since = nil
                case 5:  // an answer on a kept-alive connection: pending again
                    guard let i = open.indices.randomElement(using: &rng), open[i].since == nil else { break }
                    table.answered(open[i].c.key)
                    open[i].since = now
                case 6:  // libmicrohttpd closes one (a client's close, or a shut one)
                    guard let i = open.indices.randomElement(using: &rng) else { break }
                    table.closed(open[i].c.key)
                    open.remove(at: i)
                case 7, 8:
                    clock.advance(seconds: Double(rng.next() % 300) / 1_000)
                default:
                    _ = table.expire(at: now)
                    expired = true
                }
                // Every connection shut down in this step was pending for the grace,
                // and was not the one just accepted.
                for i in open.indices where !open[i].shut && open[i].c.wasShut {
                    open[i].shut = true
                    shedSeen += 1
                    let since = try #require(open[i].since, "a connection being answered was shut: \(context)")
                    #expect(now - since >= RequestDeadlines.headroomGrace, "shut after \(now - since) ns: \(context)")
                    #expect(i != accepted, "the connection just accepted was shut: \(context)")
                }
                // After an accept or the timer, the table is at its mark, or no
                // other connection pending has waited the grace.
                if accepted != nil || expired {
                    let staying = open.indices.filter { !open[$0].shut }
                    let waited = staying.filter { i in
                        i != accepted && open[i].since.map { now - $0 >= RequestDeadlines.headroomGrace } == true
                    }
                    #expect(
                        staying.count <= crowdedAt || waited.isEmpty,
                        "\(staying.count) staying past the mark \(crowdedAt), \(waited.count) waited: \(context)")
                }
                #expect(table.counts.open == open.count, "\(context)")
            }
            #expect(table.counts.crowded == shedSeen, "seed \(seed), round \(round)")
            shedInAll += shedSeen
        }
        #expect(shedInAll > 0, "no round crowded its table: the test tested nothing (seed \(seed))")
    }
}
