import Foundation
import Logging
import Primitives
import RunLoopStore
import RunLoopTestSupport
import Testing

@testable import RunLoopCore
@testable import RunLoopServer

/// The writer's back-off after a store failure, against a store the test
/// turns off and on. The fleet-health outage test once failed (CI, 2 of 4
/// full runs): after PostgreSQL came back, the judging instance answered
/// `/api/fleet` from the store for many seconds while its writer still sat
/// in its back-off (up to 5 s a try, more after a missed try), so its own
/// outage never ended, its heartbeat went stale, and a killed instance was
/// excused the whole time. A read the store answers now ends the back-off.
@Suite("History store: the writer's retry")
struct StoreRetryTests {
    /// A store whose reads and writes each fail while turned off; it counts
    /// the writer's tries and keeps the batches it committed.
    final class SwitchedStore: HistoryStore, @unchecked Sendable {
        struct State {
            var readsUp = false
            var writesUp = false
            /// The monotonic times of the writer's tries (registrations and writes).
            var tries: [Double] = []
            var committed: [StoreBatch] = []
            /// When each of `committed` was written (wall clock, as events' `at`).
            var committedAt: [Double] = []

            /// The index in `committed` of the batch holding event `seq`.
            func batch(holding seq: Int64) -> Int? {
                committed.firstIndex { $0.events.contains { $0.seq == seq } }
            }
        }
        let kind = "switched"
        let location = "memory"
        let state = Locked(State())

        func turn(reads: Bool, writes: Bool) {
            state.withLock {
                $0.readsUp = reads
                $0.writesUp = writes
            }
            state.notifyAll()
        }

        private func attempt() throws {
            let up = state.withLock { s -> Bool in
                s.tries.append(Monotonic.now())
                return s.writesUp
            }
            state.notifyAll()
            if !up { throw StoreError("switched off") }
        }

        func open() throws { try attempt() }
        func register(_ instance: InstanceRecord) throws -> Registration {
            try attempt()
            return Registration(boot: 1, firstSeq: 1, lostThreads: [], previous: nil)
        }
        func write(_ batch: StoreBatch) throws {
            try attempt()
            state.withLock {
                $0.committed.append(batch)
                $0.committedAt.append(Date().timeIntervalSince1970)
            }
            state.notifyAll()
        }
        func markStopped(instance: String, at: Double) throws {}
        func events(_ query: HistoryQuery) throws -> [StoredEvent] { [] }
        func threads(instance: String?, boot: Int64?, limit: Int) throws -> [StoredThread] { [] }
        func instances() throws -> [InstanceRecord] {
            guard state.withLock({ $0.readsUp }) else { throw StoreError("switched off") }
            return []
        }
        func prune(_ retention: Retention, now: Double, yield: () -> Bool) throws -> Int { 0 }
        func size() throws -> Int64 { 0 }
        func forget(instance: String, silentSince: Double) throws -> ForgetResult { .unknown }
        func close() {}

        /// Waits until `ready` holds on the state (at most `timeout` seconds).
        func wait(timeout: Double = 30, _ ready: @escaping (State) -> Bool) -> Bool {
            state.withLock(when: ready, timeout: timeout) { _, done in done }
        }
    }

    /// A recorder on `store` whose writer, once failing, would wait an hour
    /// between tries: whatever makes it try sooner is what is tested.
    static func recorder(
        _ store: SwitchedStore, backoff: ClosedRange<Double>, flushInterval: Double = StoreOptions().flushInterval
    ) -> HistoryRecorder {
        var options = StoreOptions()
        options.flushInterval = flushInterval
        options.enabled = true
        options.backoff = backoff
        // No heartbeat or prune comes due during a test.
        options.heartbeatInterval = 3_600
        options.retentionInterval = 3_600
        let recorder = HistoryRecorder(
            store: store, options: options, sequence: EventSequence(),
            warnings: WarningTable(capacity: 16, emit: { _ in }), logger: Logger(label: "test"))
        recorder.start(
            instance: InstanceRecord(
                id: "judge", url: "", version: "", host: "", pid: 1, startedAt: 0, heartbeatAt: 0))
        return recorder
    }

    @Test("a read the store answers ends the writer's back-off: it commits, with its heartbeat, at once")
    func readEndsTheBackoff() throws {
        let store = SwitchedStore()
        let recorder = Self.recorder(store, backoff: 3_600...3_600)
        defer { recorder.stop(timeout: 5) }
        // The start's registration failed; an event wakes the writer, whose try fails too.
        recorder.record(.instance(change: "note", details: [:]), seq: 1_000)
        #expect(store.wait { $0.tries.count >= 2 }, "the writer tried and now backs off for an hour")
        #expect(recorder.status.up == false)

        // A read while the store is still off changes nothing; then the store comes back.
        #expect(throws: StoreError.self) { try recorder.reading { try $0.instances() } }
        let beforeBack = Date().timeIntervalSince1970
        store.turn(reads: true, writes: true)
        _ = try recorder.reading { try $0.instances() }

        // The writer registers and commits now, not an hour later.
        #expect(store.wait { !$0.committed.isEmpty }, "no commit: the writer still backs off")
        let beat = store.state.withLock { $0.committed.first?.heartbeat }
        #expect(beat?.instance == "judge")
        #expect((beat?.at ?? 0) >= beforeBack, "the commit carries a heartbeat from after the store came back")
        let status = recorder.status
        #expect(status.up)
        #expect(status.outage?.to != nil, "the outage ended")
    }

    @Test("a store that answers reads but refuses writes is tried at most once per shortest back-off (0.25 s)")
    func triesStayBounded() throws {
        let store = SwitchedStore()
        let recorder = Self.recorder(store, backoff: 0.25...3_600)
        defer { recorder.stop(timeout: 5) }
        store.turn(reads: true, writes: false)
        recorder.record(.instance(change: "note", details: [:]), seq: 1_000)
        #expect(store.wait { $0.tries.count >= 2 })
        // Reads answered all the time: each failed try may be cut short, never below 0.25 s.
        let reader = Thread {
            // A read every millisecond until the sixth try: a wait on that
            // condition paces the reads and ends them as soon as it holds.
            repeat {
                _ = try? recorder.reading { try $0.instances() }
            } while !store.wait(timeout: 0.001, { $0.tries.count >= 6 })
        }
        reader.start()
        #expect(store.wait { $0.tries.count >= 6 }, "the writer kept trying")
        let tries = store.state.withLock { $0.tries }
        let gaps = zip(tries.dropFirst(2), tries.dropFirst(1)).map { $0 - $1 }
        #expect(gaps.allSatisfy { $0 >= HistoryRecorder.shortestBackoff - 0.001 }, "tries \(gaps) s apart")
        store.turn(reads: true, writes: true)
    }

    @Test("an outage begins when the store last answered (the last commit), not at the failed try after it")
    func outageBeginsAtTheLastAnswer() throws {
        let store = SwitchedStore()
        store.turn(reads: true, writes: true)
        let recorder = Self.recorder(store, backoff: 0.25...0.25)
        defer { recorder.stop(timeout: 5) }
        recorder.record(.instance(change: "note", details: [:]), seq: 1_000)
        #expect(store.wait { $0.committed.count >= 1 })
        // The recorder notes the commit once the store's call returned: after
        // the store counted it (under ThreadSanitizer, read between the two once).
        #expect(waitUntil(timeout: 10 * ServerProcess.slowdown) { recorder.status.lastCommitAt != nil })
        let committedAt = try #require(recorder.status.lastCommitAt)
        store.turn(reads: false, writes: false)
        let tries = store.state.withLock { $0.tries.count }
        recorder.record(.instance(change: "note", details: [:]), seq: 1_001)
        // A second failed try comes after the first one's failure was recorded.
        #expect(store.wait { $0.tries.count >= tries + 2 })
        let status = recorder.status
        #expect(status.up == false)
        #expect(
            status.outage?.from == committedAt,
            "the outage \(String(describing: status.outage)), the last commit \(committedAt)")
        #expect(status.outage?.to == nil)
        store.turn(reads: true, writes: true)
    }

    @Test("a perform that ends the queue waits for its request: a commit never falls between the two (one row)")
    func performWaitsForItsRequest() throws {
        let store = SwitchedStore()
        store.turn(reads: true, writes: true)
        // No commit waits for the last one's flush interval: the writer looks
        // at the perform at once, well within its fold window.
        let recorder = Self.recorder(store, backoff: 0.25...0.25, flushInterval: 0)
        defer { recorder.stop(timeout: 5) }
        #expect(store.wait { !$0.committed.isEmpty }, "the start's event committed")
        // CI (ThreadSanitizer) saw the writer take a perform alone, its first
        // commit being due at once, and the request a moment later kept a
        // row of its own. The request is recorded here once the writer holds
        // the perform, or has committed it.
        let result = HistoryRowTests.results[0]
        let at = Date().timeIntervalSince1970
        recorder.record(.event(.perform(thread: "t1", result: result)), seq: 1_000, at: at)
        let alone = { (s: SwitchedStore.State) in s.batch(holding: 1_000) }
        _ = waitUntil(timeout: 10 * ServerProcess.slowdown) {
            recorder.state.withLock { $0.awaitingNext } || store.state.withLock { alone($0) != nil }
        }
        let answer = Array(PerformJSON.row(result, at: at).utf8)
        recorder.record(
            .request(
                method: "POST", path: "/api/threads/t1/perform", status: 200, requestId: "r1", body: [],
                answer: answer), seq: 1_001, at: at + 0.02)
        #expect(store.wait { alone($0) != nil })
        let (rows, committedAt) = store.state.withLock { s in
            (s.committed.flatMap(\.events), alone(s).map { s.committedAt[$0] } ?? 0)
        }
        let perform = try #require(rows.first { $0.seq == 1_000 })
        if perform.request == nil {
            // Only a writer that first looked at the queue after the window may
            // commit the perform alone.
            let after = committedAt - at
            #expect(after >= StoredEvent.foldWindow - 0.001, "committed \(after) s after the perform")
        } else {
            #expect(perform.requestAt == at + 0.02)
            #expect(!rows.contains { $0.seq == 1_001 }, "the request kept a row of its own too")
        }
    }

    @Test("a perform nobody answers is committed once the fold window has passed, not held")
    func unansweredPerformIsCommitted() throws {
        let store = SwitchedStore()
        store.turn(reads: true, writes: true)
        let recorder = Self.recorder(store, backoff: 0.25...0.25)
        defer { recorder.stop(timeout: 5) }
        let at = Date().timeIntervalSince1970
        recorder.record(.event(.perform(thread: "t1", result: HistoryRowTests.results[0])), seq: 1_000, at: at)
        #expect(store.wait { $0.batch(holding: 1_000) != nil })
        #expect(Date().timeIntervalSince1970 - at >= StoredEvent.foldWindow - 0.001, "committed within the window")
        #expect(recorder.state.withLock { !$0.awaitingNext })
    }

    @Test("a perform queued as the writer takes its first batch waits for its answer (random gaps; seed printed)")
    func performQueuedAsTheWriterTakes() throws {
        // CI (ThreadSanitizer) saw a perform recorded just after the start
        // committed 0.4 ms later: the writer had looked at the queue (the
        // start's event last, no perform to wait for) and took the perform
        // with it. Each round starts a writer and records a perform a random
        // moment later, before, during or after its first take.
        let seed = SplitMix.seed("WRITER_TAKE_SEED", test: "StoreRetryTests.performQueuedAsTheWriterTakes")
        var generator = SplitMix(seed)
        for round in 0..<100 {
            let store = SwitchedStore()
            store.turn(reads: true, writes: true)
            let recorder = Self.recorder(store, backoff: 0.25...0.25, flushInterval: 0)
            defer { recorder.stop(timeout: 5) }
            // Spun, not slept: a gap of microseconds.
            let until = Monotonic.now() + Double.random(in: 0...0.0003, using: &generator)
            while Monotonic.now() < until {}
            let at = Date().timeIntervalSince1970
            recorder.record(.event(.perform(thread: "t1", result: HistoryRowTests.results[0])), seq: 1_000, at: at)
            #expect(store.wait { $0.batch(holding: 1_000) != nil })
            let after = store.state.withLock { s in s.batch(holding: 1_000).map { s.committedAt[$0] } ?? 0 } - at
            #expect(
                after >= StoredEvent.foldWindow - 0.001,
                "round \(round): the perform committed \(after) s after it was queued, within its window")
        }
    }

    @Test("a stream of performs nobody answers never starves the writer: the first commits while it flows")
    func performStreamDoesNotStarveTheWriter() throws {
        let store = SwitchedStore()
        store.turn(reads: true, writes: true)
        let recorder = Self.recorder(store, backoff: 0.25...0.25, flushInterval: 0)
        defer { recorder.stop(timeout: 5) }
        // A perform every 20 ms for 1.5 s, each the queue's last when the
        // writer looks: a writer that waited for every new one's answer
        // would commit nothing until the stream ends.
        let streamEnds = Monotonic.now() + 1.5 * ServerProcess.slowdown
        var seq: Int64 = 1_000
        var committedWhileFlowing = false
        while Monotonic.now() < streamEnds {
            recorder.record(.event(.perform(thread: "t1", result: HistoryRowTests.results[0])), seq: seq)
            seq += 1
            // Paced by the wait for the first perform's commit (20 ms at most).
            if store.wait(timeout: 0.02, { $0.batch(holding: 1_000) != nil }) {
                committedWhileFlowing = true
                break
            }
        }
        #expect(committedWhileFlowing, "the first of \(seq - 1_000) performs was not committed while they flowed")
    }

    @Test("an outage's start: the last answer, at most one heartbeat interval back, never after now")
    func outageStartBounds() {
        var status = HistoryRecorder.Status()
        #expect(HistoryRecorder.outageStart(status, now: 100, beat: 5) == 100)
        status.lastCommitAt = 98
        #expect(HistoryRecorder.outageStart(status, now: 100, beat: 5) == 98)
        // An idle store's last commit long ago: one interval back.
        status.lastCommitAt = 10
        #expect(HistoryRecorder.outageStart(status, now: 100, beat: 5) == 95)
        // A registration ended the outage before, with no commit since.
        status.outage = (from: 90, to: 97)
        #expect(HistoryRecorder.outageStart(status, now: 100, beat: 5) == 97)
    }
}
