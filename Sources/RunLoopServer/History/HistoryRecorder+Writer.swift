import CLinux
import DequeModule
import Foundation
import Logging
import Primitives
import RunLoopCore
import RunLoopStore

/// The writer thread: batches, commits, back-off, retention.
extension HistoryRecorder {
    /// The writer: sleeps until something is queued (or the heartbeat, the
    /// retention or a retry is due), waits out the rest of `flushInterval`
    /// since the last commit, commits what is queued in one transaction,
    /// repeats. A failed batch goes back to the front and the writer backs off.
    func writerLoop() {
        var lastCommit = -Double.infinity
        var lastBeat = Monotonic.now()
        var lastPrune = Monotonic.now()
        var backoff = 0.0
        // The queue held more than one transaction's bytes at the last take:
        // the next chunk goes at once, not a flush interval later.
        var backlog = false
        // Bytes written since the memory was last given back.
        var writtenBytes = 0
        // Bytes written since the size bound was last checked (a store with
        // no cheap check after each commit: PostgreSQL). A tenth of the
        // bound written checks it again, so a flood cannot outrun it for
        // the 60 s between periodic prunes.
        var unchecked = 0
        let checkEvery = options.retention.maxBytes.map { Int(clamping: max(1, $0 / 10)) } ?? Int.max
        let batchBytes = options.batchBytes
        // Heartbeats matter to a fleet (PostgreSQL: others judge this instance by
        // them). An idle SQLite runloopd wakes for nothing: its heartbeat and its
        // retention ride on the commits of events.
        let beats = store.kind != "sqlite"
        while true {
            let due =
                beats ? min(lastBeat + options.heartbeatInterval, lastPrune + options.retentionInterval) : .infinity
            var sleep = backoff > 0 ? backoff : max(0, due - Monotonic.now())
            if backoff > 0 {
                // A failed try: the shortest back-off first, whatever the
                // reads say; then the rest of it, unless a read the store
                // answered meanwhile (`storeAnswered`) says to try now.
                let first = min(backoff, Self.shortestBackoff)
                state.withLock(when: { $0.stopping || $0.flushWanted }, timeout: first) { _, _ in }
                sleep = backoff - first
            }
            // After a burst, one wake-up once the queue has stayed empty for
            // `trimIdle`: the heap the burst freed goes back to the system.
            let trimming = writtenBytes >= Self.trimAfterBytes && backoff == 0
            if trimming { sleep = min(sleep, Self.trimIdle) }
            let woken = state.withLock(
                when: {
                    $0.stopping || $0.flushWanted || (backoff == 0 && !$0.queue.isEmpty) || (backoff > 0 && $0.retryNow)
                }, timeout: sleep
            ) { _, woken in woken }
            if trimming, !woken {
                writtenBytes = 0
                // glibc keeps the pages of freed memory in its arenas
                // otherwise: RSS stayed at a flood's peak.
                _ = clinux_malloc_trim()
                continue
            }
            // One commit per flushInterval at most: later events join this batch.
            let early = lastCommit + options.flushInterval - Monotonic.now()
            if early > 0, !backlog {
                state.withLock(when: { $0.stopping || $0.flushWanted }, timeout: early) { _, _ in }
            }
            // A transaction takes at most `batchBytes` of text (a commit's
            // pages stay a small share of the size bound).
            var (taken, stopping, queuedBytes, takenBytes) = takeBatch(batchBytes: batchBytes)
            backlog = queuedBytes > batchBytes
            writtenBytes += takenBytes
            unchecked += takenBytes
            let count = taken.count
            var ok = state.withLock { $0.status.registered } || register()
            if ok && (count > 0 || (beats && Monotonic.now() - lastBeat >= options.heartbeatInterval)) {
                let started = Monotonic.now()
                do {
                    try store.write(batch(taken))
                    let seconds = Monotonic.now() - started
                    lastBeat = Monotonic.now()
                    let spare = state.withLock { s -> Deque<Queued> in
                        s.inFlight = []
                        s.inFlightBytes = 0
                        s.status.written += count
                        s.status.batches += count == 0 ? 0 : 1
                        s.status.lastCommitAt = Date().timeIntervalSince1970
                        s.status.lastCommitSeconds = seconds
                        return s.spare
                    }
                    state.notifyAll()
                    // Emptied outside the lock (the events' last references go
                    // here), then kept as the next spare if none came meanwhile.
                    if spare.isEmpty, taken.count <= Self.recycledCapacity {
                        var emptied = taken
                        taken = Deque()
                        emptied.removeAll(keepingCapacity: true)
                        state.withLock { s in if s.spare.isEmpty { s.spare = emptied } }
                    }
                    taken = Deque()
                    recovered()
                } catch {
                    ok = false
                    failed(error)
                }
            }
            if !ok {
                requeue(taken)
                if stopping { break }
                backoff = min(max(backoff * 2, options.backoff.lowerBound), options.backoff.upperBound)
                continue
            }
            backoff = 0
            if count > 0 { lastCommit = Monotonic.now() }
            // By the clock (age and size), and (SQLite) whenever the file and
            // its WAL pass the size bound's trigger: a stat after each commit,
            // and then the size only (the age's delete runs by the clock).
            let pruneDue = Monotonic.now() - lastPrune >= options.retentionInterval
            let measure = store.kind != "sqlite" && unchecked >= checkEvery
            if pruneDue || measure || (count > 0 && store.overLimit(options.retention)) {
                if pruneDue { lastPrune = Monotonic.now() }
                unchecked = 0
                prune(byAge: pruneDue)
            }
            if stopping && state.withLock({ $0.queue.isEmpty }) { break }
        }
        let everything = state.withLock { s in
            defer {
                s.stopped = true
                s.inFlight = []
            }
            return s.queue.isEmpty && s.inFlight.isEmpty
        }
        state.notifyAll()
        // The store's last work happens here, on the writer, like all of it: a
        // slow disk or an unreachable server holds this thread, never the stop.
        if everything {
            try? store.markStopped(instance: instance.id, at: Date().timeIntervalSince1970)
        }
        store.close()
        state.withLock { $0.closed = true }
        state.notifyAll()
    }

    /// The writer's longest wait between two tries of a failing store (seconds):
    /// another instance may take this long to write again after the store
    /// comes back (fleet health allows for it). Its shortest, and the least
    /// time between two tries however often reads say the store answers.
    static let longestBackoff = 5.0
    static let shortestBackoff = 0.25

    /// The largest batch whose buffer is kept for the next queue (events):
    /// a burst's larger buffer is given back.
    static let recycledCapacity = 16_384

    /// Bytes written past which the writer, once idle for `trimIdle`
    /// seconds, gives the freed heap back (`malloc_trim`): after a burst, not
    /// after every trickle of events.
    static let trimAfterBytes = 4 << 20
    static let trimIdle = 1.0

    /// Puts an uncommitted batch back at the front (the queue's bound still holds: the oldest go first).
    func requeue(_ items: some Collection<Queued>) {
        guard !items.isEmpty else { return }
        let capacity = options.queueCapacity
        let byteCapacity = options.queueBytes
        state.withLock { s in
            s.inFlight = []
            s.inFlightBytes = 0
            s.queue.insert(contentsOf: items, at: 0)
            s.queueBytes += items.reduce(0) { $0 + $1.bytes }
            while let oldest = s.queue.first, s.queue.count > capacity || s.queueBytes > byteCapacity {
                s.queue.removeFirst()
                s.queueBytes -= oldest.bytes
                s.status.dropped += 1
            }
        }
    }

    /// The retention as this instance applies it (its scope filled in).
    var retention: Retention {
        var retention = options.retention
        retention.instance = options.retentionScope == .instance ? instance.id : nil
        return retention
    }

    /// Applies the retention now (the writer's thread); `byAge` false: the
    /// size bound only. A prune that deleted
    /// something is counted, and logged at warning (history is gone): at
    /// once, unless a warning line was written within `retentionInterval`
    /// (SQLite prunes after any commit past the limit's trigger, several
    /// times a second under load); then at debug, and the next warning line
    /// carries the prunes and events since the previous one.
    func prune(byAge: Bool = true) {
        var retention = self.retention
        if !byAge { retention.maxAge = nil }
        do {
            let started = Monotonic.now()
            // A size prune (SQLite: from 90 % of the bound down to 60 %) is
            // many steps: it stops between two once a quarter of the queue
            // waits (or at the stop), and the next commit takes it up again.
            let backlog = max(1, options.queueCapacity / 4)
            let backlogBytes = max(1, options.queueBytes / 4)
            let removed = try store.prune(retention, now: Date().timeIntervalSince1970) {
                state.withLock { $0.stopping || $0.queue.count >= backlog || $0.queueBytes >= backlogBytes }
            }
            guard removed > 0 else { return }
            let seconds = Monotonic.now() - started
            let total = state.withLock { s in
                s.status.pruned += removed
                return s.status.pruned
            }
            let interval = options.retentionInterval
            let (line, prunes, events) = unlogged.withLock { u in
                u.prunes += 1
                u.events += removed
                let due = Monotonic.now() - u.lastLine >= interval
                defer {
                    if due {
                        u = (0, 0, Monotonic.now())
                    }
                }
                return (due, u.prunes, u.events)
            }
            var metadata: Logger.Metadata = [
                "events": .stringConvertible(removed), "prunedTotal": .stringConvertible(total),
                "scope": "\(options.retentionScope.rawValue)",
                "store": "\(store.kind)", "seconds": .stringConvertible(Rep.rounded3(seconds)),
            ]
            if let maxAge = retention.maxAge { metadata["retentionSeconds"] = .stringConvertible(Rep.rounded3(maxAge)) }
            if let maxBytes = retention.maxBytes { metadata["retentionBytes"] = .stringConvertible(maxBytes) }
            if let sqlite = store as? SQLiteStore { metadata["fileBytes"] = .stringConvertible(sqlite.fileBytes()) }
            if line {
                metadata["prunesSinceLastLine"] = .stringConvertible(prunes)
                metadata["eventsSinceLastLine"] = .stringConvertible(events)
                logger.warning("history pruned", metadata: metadata)
            } else {
                logger.debug("history pruned", metadata: metadata)
            }
        } catch {
            failed(error)
        }
    }

    /// Waits for the event after a perform that ends the queue, at most
    /// until `StoredEvent.foldWindow` after the perform: the request that
    /// answers it is queued a moment later (once the answer is sent), and
    /// the two share a row only when they are committed together. Without
    /// this wait a commit falling between them split the pair on a busy
    /// machine. A stop or a flush does not wait; a perform nobody answers
    /// over HTTP is committed at most the window later.
    func awaitAnswer() {
        let last = state.withLock { s -> Queued? in
            guard let last = Self.answerPending(s) else { return nil }
            s.awaitingNext = true
            return last
        }
        guard let last else { return }
        let remaining = last.at + StoredEvent.foldWindow - Date().timeIntervalSince1970
        state.withLock(
            when: { $0.stopping || $0.flushWanted || $0.queue.last?.seq != last.seq }, timeout: max(0, remaining)
        ) { s, _ in s.awaitingNext = false }
    }

    /// The perform that ends the queue, while the writer waits for its
    /// answer: within its fold window, and no stop or flush wanted.
    static func answerPending(_ s: State) -> Queued? {
        guard !s.stopping, !s.flushWanted, let last = s.queue.last, last.type == "perform",
            last.at + StoredEvent.foldWindow > Date().timeIntervalSince1970
        else { return nil }
        return last
    }

    /// The next batch, taken from the queue after waiting for the answer to
    /// a perform that ends it (`awaitAnswer`).
    func takeBatch(batchBytes: Int) -> (Deque<Queued>, Bool, Int, Int) {
        awaitAnswer()
        return state.withLock { Self.take(&$0, batchBytes: batchBytes) }
    }

    /// Takes a transaction's worth from the queue, under the state's lock.
    /// The whole queue, when it fits, changes hands in O(1): the recording
    /// threads never wait behind a copy. The queue's storage is recycled:
    /// the next queue is the batch before last's buffer, emptied (see
    /// `State.spare`). A larger queue gives its oldest chunk, which never
    /// ends between a perform and its request (one row).
    ///
    /// A perform that ends the queue still within its fold window stays
    /// queued for the next batch, whatever the wait before saw: the wait and
    /// the take look at the queue under two locks, and a perform queued
    /// between the two was committed at once without its request (CI saw it
    /// 0.4 ms after the perform). A stream of performs nobody answers never
    /// holds a batch: all but the last go.
    static func take(_ s: inout State, batchBytes: Int) -> (Deque<Queued>, Bool, Int, Int) {
        let holdLast = answerPending(s) != nil
        s.flushWanted = false
        // Only a read answered from here on calls for an early try.
        s.retryNow = false
        let queued = s.queueBytes
        if s.queueBytes <= batchBytes {
            let held = holdLast ? s.queue.removeLast() : nil
            s.inFlight = s.queue
            s.inFlightBytes = s.queueBytes - (held?.bytes ?? 0)
            s.queue = s.spare
            s.queueBytes = 0
            s.spare = Deque()
            if let held {
                s.queue.append(held)
                s.queueBytes = held.bytes
            }
        } else {
            var chunk = Deque<Queued>()
            var bytes = 0
            while let oldest = s.queue.first, chunk.isEmpty || bytes + oldest.bytes <= batchBytes {
                chunk.append(s.queue.removeFirst())
                bytes += oldest.bytes
            }
            if let last = chunk.last, let next = s.queue.first, folds(last, next) {
                chunk.append(s.queue.removeFirst())
                bytes += next.bytes
            }
            s.inFlight = chunk
            s.inFlightBytes = bytes
            s.queueBytes -= bytes
        }
        return (s.inFlight, s.stopping, queued, s.inFlightBytes)
    }

    /// Rows for a batch (serialized here, on the writer's thread). A
    /// perform followed by the request it answered (the next event id, the
    /// same thread) share one row: a perform request, the most frequent
    /// change, costs the store one row, not two (docs/history.md).
    func batch(_ items: Deque<Queued>) -> StoreBatch {
        let (boot, instance) = state.withLock { ($0.status.boot, $0.instance) }
        var batch = StoreBatch(
            heartbeat: (instance.id, Date().timeIntervalSince1970, sequence.current + Self.seqReserve))
        batch.events.reserveCapacity(items.count)
        var index = items.startIndex
        while index < items.endIndex {
            var (event, thread) = Self.stored(items[index], instance: instance.id, boot: boot)
            index += 1
            if index < items.endIndex, Self.folds(items[index - 1], items[index]) {
                let request = items[index].data
                event.request = StoredEvent.compacted(request: request, perform: event.data) ?? request
                event.requestAt = items[index].at
                index += 1
            }
            batch.events.append(event)
            if let thread { batch.threads.append(thread) }
        }
        return batch
    }

    /// Whether `next` is the request that answered `perform` (kept in its
    /// row): the next event id, the same thread, at most
    /// `StoredEvent.foldWindow` later.
    static func folds(_ perform: Queued, _ next: Queued) -> Bool {
        next.seq == perform.seq + 1 && perform.type == "perform" && next.type == "request"
            && next.thread == perform.thread && next.threadRow == nil && next.at >= perform.at
            && next.at - perform.at <= StoredEvent.foldWindow
    }
}
