import Foundation
import MicroHTTP
import Primitives
import RunLoopCore

/// What the snapshots remember between two of them: each thread's busy time
/// and wake-ups at its last row (for the rates), its state and busy share
/// (for the summary). Touched only on the hub's snapshot queue.
struct SnapshotBook: Sendable {
    struct Sample: Sendable {
        var busyMs: Double
        var wakeups: Int
        var at: Double
    }
    var samples: [String: Sample] = [:]
    var states: [String: String] = [:]
    var busy: [String: Double] = [:]
    /// Threads whose last row had a non-zero rate: sent again next time even
    /// without an event, so a loop that went quiet drops to 0.
    var active: Set<String> = []
    var lastFlushAt: Double?
}

/// The coalesced `snapshot` events of `scope=summary` streams.
///
/// Threads: `publish` marks an event's thread dirty under the client table's
/// lock and, when the set stops being empty, arms one delayed call on
/// `snapshotQueue`; nothing else runs while no summary stream is open or
/// nothing changed (an idle runloopd sleeps). `flush` runs there: it takes the
/// dirty set, reads those threads (their locks, one at a time, none held),
/// serializes the snapshot once and sends it to every summary stream. The
/// next one is due after the interval, or later when the bytes sent would
/// exceed the streams' byte budget.
extension EventHub {
    /// Marks a snapshot due; true when the caller must schedule it (after the lock).
    static func armFlush(_ c: inout Clients) -> Bool {
        guard !c.flushArmed else { return false }
        c.flushArmed = true
        return true
    }

    /// Schedules the snapshot marked due, at the earliest it may go.
    func scheduleFlush() {
        let at = clients.withLock { $0.nextFlushAt }
        let delay = max(0, at - Monotonic.now())
        snapshotQueue.asyncAfter(deadline: .now() + delay) { [weak self] in self?.flush() }
    }

    /// Builds and sends one snapshot (on `snapshotQueue`).
    func flush() {
        let now = Monotonic.now()
        // When the snapshot is taken: its rows are read from here on.
        let at = Timestamp.value(Date())
        let interval = snapshotInterval
        enum Step {
            case early
            case idle
            case send(
                dirty: Set<String>, targets: [(key: UInt64, stream: EventStream, full: Bool, skipped: Int)], stale: Bool
            )
        }
        let step: Step = clients.withLock { c in
            // Armed before a larger snapshot pushed the next one back: wait for it.
            if now < c.nextFlushAt { return .early }
            c.flushArmed = false
            let dirty = c.dirty
            c.dirty.removeAll(keepingCapacity: true)
            var targets: [(key: UInt64, stream: EventStream, full: Bool, skipped: Int)] = []
            for (key, client) in c.streams where client.scope != nil && client.held == nil {
                targets.append((key, client.stream, client.needsFull, client.skipped))
                c.streams[key]?.needsFull = false
                c.streams[key]?.skipped = 0
            }
            guard !targets.isEmpty else { return .idle }
            c.nextFlushAt = now + interval
            defer { c.bookStale = false }
            return .send(dirty: dirty, targets: targets, stale: c.bookStale)
        }
        let dirty: Set<String>
        let targets: [(key: UInt64, stream: EventStream, full: Bool, skipped: Int)]
        let stale: Bool
        switch step {
        case .early:
            scheduleFlush()
            return
        case .idle:
            book.withLock { $0 = SnapshotBook() }
            return
        case .send(let d, let t, let s):
            dirty = d
            targets = t
            stale = s
        }
        guard let registry else { return }
        let full = targets.contains { $0.full }
        var memory = book.withLock { b in
            defer { b = SnapshotBook() }
            return b
        }
        // After a pause (every summary stream closed meanwhile) the old samples say nothing.
        if stale { memory = SnapshotBook() }
        let changed = dirty.union(memory.active)
        var workers: [Worker] = []
        var removed: [String] = []
        // Removed: threads gone from the registry that a row was sent for.
        if full {
            workers = registry.allWorkers
            let known = Set(workers.map(\.id))
            removed = changed.filter { !known.contains($0) && memory.states[$0] != nil }.sorted(by: Self.idOrder)
        } else {
            for id in changed.sorted(by: Self.idOrder) {
                if let worker = registry.lookup(id) {
                    workers.append(worker)
                } else if memory.states[id] != nil {
                    removed.append(id)
                }
            }
        }
        for id in removed {
            memory.samples[id] = nil
            memory.states[id] = nil
            memory.busy[id] = nil
            memory.active.remove(id)
        }
        if full {
            // Threads forgotten while nobody watched.
            let known = Set(workers.map(\.id))
            for id in memory.states.keys where !known.contains(id) {
                memory.samples[id] = nil
                memory.states[id] = nil
                memory.busy[id] = nil
                memory.active.remove(id)
            }
        }
        let since = memory.lastFlushAt
        var allRows: [Value] = []
        var changedRows: [Value] = []
        for worker in workers {
            let load = worker.load()
            var object = Rep.explainedThread(worker, load: load).object ?? [:]
            let busyMs = load.stats.busyMs
            let wakeups = load.stats.wakeups.values.reduce(0, +)
            var busyPercent: Double
            var perSecond: Double
            if let previous = memory.samples[worker.id], let since {
                // Over the last interval: a thread without a row last time had no
                // event since, so what it did falls after the last snapshot.
                let elapsed = max(0.001, min(now - previous.at, now - since))
                busyPercent = (busyMs - previous.busyMs) / (elapsed * 1000) * 100
                perSecond = Double(wakeups - previous.wakeups) / elapsed
            } else {
                // A first row: the busy window's share; wake-ups from the next snapshot on.
                busyPercent = (load.utilization ?? 0) * 100
                perSecond = 0
            }
            busyPercent = (min(100, max(0, busyPercent)) * 10).rounded() / 10
            perSecond = (max(0, perSecond) * 10).rounded() / 10
            object["busyPercent"] = .number(busyPercent)
            object["wakeupsPerSecond"] = .number(perSecond)
            memory.samples[worker.id] = SnapshotBook.Sample(busyMs: busyMs, wakeups: wakeups, at: now)
            memory.states[worker.id] = object["state"]?.string ?? "unknown"
            memory.busy[worker.id] = busyPercent
            if busyPercent > 0 || perSecond > 0 {
                memory.active.insert(worker.id)
            } else {
                memory.active.remove(worker.id)
            }
            let row = Value.object(object)
            if full { allRows.append(row) }
            if !full || changed.contains(worker.id) { changedRows.append(row) }
        }
        memory.lastFlushAt = now
        let summary = Self.summary(memory, total: registry.workerCount, warnings: registry.diagnostics.warnings)
        book.withLock { $0 = memory }

        func text(_ rows: [Value], skipped: Int) -> String {
            var object: [String: Value] = [
                "at": at, "rows": .array(rows), "removed": .array(removed.map(Value.string)), "summary": summary,
            ]
            if skipped > 0 { object["skipped"] = .number(Double(skipped)) }
            return JSON.string(.object(object))
        }
        let changedText = text(changedRows, skipped: 0)
        let fullText = full ? text(allRows, skipped: 0) : changedText
        var sent: [(key: UInt64, bytes: Int)] = []
        for target in targets {
            let body =
                target.skipped > 0
                ? text(target.full ? allRows : changedRows, skipped: target.skipped)
                : (target.full ? fullText : changedText)
            if target.stream.send(event: "snapshot", data: body) { sent.append((target.key, body.utf8.count)) }
        }
        // The byte budget: each stream's tokens pay for the snapshot (going
        // below zero); the next snapshot waits until the stream furthest in
        // debt is paid up, and inspected events wait for tokens too, so
        // snapshots and events together stay within the budget.
        let rate = maxBytesPerSecond
        clients.withLock { c in
            var debt = 0.0
            for (key, bytes) in sent {
                guard let client = c.streams[key] else { continue }
                let tokens = min(rate, client.tokens + (now - client.refilledAt) * rate) - Double(bytes)
                c.streams[key]?.tokens = tokens
                c.streams[key]?.refilledAt = now
                debt = max(debt, -tokens)
            }
            c.nextFlushAt = max(c.nextFlushAt, now + debt / rate)
        }
    }

    /// Thread ids in creation order (`t2` before `t10`).
    static func idOrder(_ a: String, _ b: String) -> Bool {
        (WorkerRegistry.number(a) ?? 0, a) < (WorkerRegistry.number(b) ?? 0, b)
    }

    /// The summary of a snapshot: threads known, counts by state, active
    /// warnings by code, the five busiest threads of the last interval.
    static func summary(_ memory: SnapshotBook, total: Int, warnings: WarningTable) -> Value {
        var byState: [String: Value] = [:]
        var counts: [String: Int] = [:]
        for state in memory.states.values { counts[state, default: 0] += 1 }
        for (state, count) in counts { byState[state] = .number(Double(count)) }
        var top: [(id: String, busy: Double)] = []
        for (id, busy) in memory.busy where busy > 0 {
            guard top.count < 5 || busy > top[top.count - 1].busy else { continue }
            top.append((id, busy))
            top.sort { $0.busy > $1.busy || ($0.busy == $1.busy && idOrder($0.id, $1.id)) }
            if top.count > 5 { top.removeLast() }
        }
        return [
            "threads": .number(Double(total)), "byState": .object(byState),
            "warningsByCode": .object(warnings.activeCounts().mapValues { .number(Double($0)) }),
            "busiest": .array(top.map { ["id": .string($0.id), "busyPercent": .number($0.busy)] }),
        ]
    }
}
