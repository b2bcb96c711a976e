import Foundation
import Primitives

/// The workers of one process: ids, limits, the selector registry and the
/// event sink. Thread-safe: the table of workers is one `Locked`, never held
/// while a worker is asked anything (workers take their own lock).
public final class WorkerRegistry: Sendable {
    /// The bounds every worker enforces.
    public let limits: Limits
    /// The named actions performs, timers, sources and tasks may call.
    public let selectors: SelectorRegistry
    /// Where every id of this registry's workers comes from (`t1`, `tm3`, `p12`, …).
    public let ids = IdCounter()
    /// The explainer's shared parts: options, warnings, the stall watchdog.
    public let diagnostics: LoopDiagnostics
    private let events: @Sendable (RunLoopEvent) -> Void
    private struct Table {
        var workers: [String: Worker] = [:]
        var order: [String] = []
        /// The number in each id of `order` (`t17` → 17): ids grow, so this is
        /// sorted and a page's start is a binary search.
        var numbers: [UInt64] = []
    }
    private let table = Locked(Table())
    /// Told the ids whose listing changed (never under a lock): the exited
    /// workers the registry forgets, and a new worker once it is listed (its
    /// first events come from its thread before it is: a summary stream that
    /// read the registry then did not find it, and reads it again).
    private let listingChanged: @Sendable ([String]) -> Void

    /// Creates a registry. `events` receives every `RunLoopEvent` on the thread
    /// where it happened; it must not block.
    public init(
        limits: Limits = Limits(), selectors: SelectorRegistry? = nil,
        diagnostics: DiagnosticsOptions = DiagnosticsOptions(),
        events: @escaping @Sendable (RunLoopEvent) -> Void = { _ in },
        listingChanged: @escaping @Sendable ([String]) -> Void = { _ in }
    ) {
        self.limits = limits
        self.listingChanged = listingChanged
        self.selectors = selectors ?? SelectorRegistry(limits: limits)
        // Publishing an event runs the service's code (the store, the SSE hub):
        // a call-out, never under a lock (debug builds stop when it is).
        let publish: @Sendable (RunLoopEvent) -> Void = { event in
            LockCheck.assertNoneHeld("publishing an event")
            events(event)
        }
        self.events = publish
        self.diagnostics = LoopDiagnostics(options: diagnostics, events: publish)
    }

    deinit {
        diagnostics.shutdown()
    }

    /// The next id with `prefix` (`t1`, `tm3`, …): never reused in this registry.
    public func nextId(_ prefix: String) -> String { ids.next(prefix) }

    /// Validates options and starts a worker.
    public func createWorker(_ options: WorkerOptions = WorkerOptions()) throws(RunLoopError) -> Worker {
        try Self.validate(options, limits: limits)
        if let size = options.turnRingSize, !(1...diagnostics.options.maxTurnRingSize).contains(size) {
            throw .badValue(
                "turnRingSize",
                "turnRingSize must be 1...\(diagnostics.options.maxTurnRingSize) (the server's bound, --max-turn-ring-size)"
            )
        }
        // Count live workers without holding the table's lock while asking them.
        let known = allWorkers
        let exited = known.filter(\.hasExited).map(\.id)
        let live = known.filter { !$0.hasExited && !$0.isEnding }.count
        guard live < limits.maxWorkers else {
            throw .limit(.tooManyThreads, "\(live) threads are running (limit \(limits.maxWorkers))")
        }
        let id = nextId("t")
        let worker = try Worker(
            id: id, options: options, limits: limits, selectors: selectors, registry: self, events: events)
        let forgotten = table.withLock { t -> [Worker] in
            t.workers[id] = worker
            // In id order even if two creations raced: almost always the end.
            let number = Self.number(id) ?? 0
            var slot = t.numbers.count
            while slot > 0, t.numbers[slot - 1] > number { slot -= 1 }
            t.order.insert(id, at: slot)
            t.numbers.insert(number, at: slot)
            // Forgets the oldest exited workers beyond `retainedExitedWorkers`.
            guard exited.count > limits.retainedExitedWorkers else { return [] }
            let forgotten = exited.prefix(exited.count - limits.retainedExitedWorkers).compactMap {
                t.workers.removeValue(forKey: $0)
            }
            var kept = 0
            for index in t.order.indices where t.workers[t.order[index]] != nil {
                t.order[kept] = t.order[index]
                t.numbers[kept] = t.numbers[index]
                kept += 1
            }
            t.order.removeSubrange(kept...)
            t.numbers.removeSubrange(kept...)
            return forgotten
        }
        // Released after the lock: the table may have held a forgotten worker's
        // last reference, and with it its records' (their CF objects are freed then).
        listingChanged(forgotten.map(\.id) + [id])
        return worker
    }

    /// Checks a worker's options against the limits.
    public static func validate(_ options: WorkerOptions, limits: Limits) throws(RunLoopError) {
        if let name = options.name {
            guard !name.isEmpty, name.utf8.count <= limits.maxNameLength,
                !name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7f })
            else {
                throw .badValue("name", "a name is 1-\(limits.maxNameLength) bytes without control characters")
            }
        }
        let policy = options.policy
        if !policy.isDistantFuture { try limits.checkSeconds(policy.seconds, field: "run.seconds") }
        if policy.mode.isCommon {
            throw .badValue("run.mode", "a loop runs in one mode; common is a set of modes, not a mode to run in")
        }
        if policy.style.defaultModeOnly && policy.mode != .default {
            throw .badValue(
                "run.mode",
                "\(policy.style.rawValue) mirrors \(policy.style.cocoaName), which always runs the default mode")
        }
        if policy.style == .runUntilDate && policy.isDistantFuture {
            throw .badValue("run.seconds", "runUntilDate needs run.seconds: how long until the date")
        }
    }

    /// The worker with `id`, live or recently exited.
    public func worker(_ id: String) throws(RunLoopError) -> Worker {
        guard let worker = table.withLock({ $0.workers[id] }) else { throw .notFound("thread", id) }
        return worker
    }

    /// The thread that owns source (`kind` "source") or timer (`kind` "timer")
    /// `itemId`, when one does: ids are unique across threads, so a request
    /// that names another thread's item can say whose it is.
    public func owner(of kind: String, _ itemId: String) -> String? {
        allWorkers.first { $0.holds(kind, itemId) }?.id
    }

    /// Every worker known, in creation order (exited ones are kept for a while).
    public var allWorkers: [Worker] {
        table.withLock { t in t.order.compactMap { t.workers[$0] } }
    }

    /// How many workers are known (live and recently exited).
    public var workerCount: Int { table.withLock { $0.order.count } }

    /// The worker with `id`, or nil (no error built: a lookup per event).
    public func lookup(_ id: String) -> Worker? { table.withLock { $0.workers[id] } }

    /// One page of `allWorkers`: at most `limit` workers created after the
    /// worker whose id is `after` (from the first when nil), with how many are
    /// known in all and whether more follow. `after` need not be known any
    /// more: ids grow, so the page starts at the first id above it. Costs a
    /// binary search and the page, not a walk of every worker.
    public func page(after: String?, limit: Int) -> (workers: [Worker], total: Int, more: Bool) {
        let floor = after.flatMap(Self.number)
        return table.withLock { t in
            var start = 0
            if let floor {
                var high = t.numbers.count
                while start < high {
                    let middle = (start + high) / 2
                    if t.numbers[middle] <= floor { start = middle + 1 } else { high = middle }
                }
            }
            // Saturating: `limit` may be Int.max (every thread after the cursor).
            let end = start + min(max(0, limit), t.order.count - start)
            let workers = t.order[start..<end].compactMap { t.workers[$0] }
            return (workers, t.order.count, end < t.order.count)
        }
    }

    /// The number of a worker id (`t17` → 17), nil for anything else.
    public static func number(_ id: String) -> UInt64? {
        let digits = id.utf8.dropFirst()
        guard id.utf8.first == UInt8(ascii: "t"), !digits.isEmpty, digits.count <= 19,
            digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 })
        else { return nil }
        return UInt64(Substring(digits))
    }

    /// Ends every worker and waits (up to `timeout` in all) for their threads.
    /// Returns each worker's final snapshot (nil for one that did not end in time).
    @discardableResult
    public func endAll(timeout: Double = 5, origin: StopOrigin = .threadEnding) -> [(
        id: String, snapshot: WorkerSnapshot?
    )] {
        let list = allWorkers
        let group = DispatchGroup()
        let results = Locked<[String: WorkerSnapshot]>([:])
        for worker in list {
            group.enter()
            worker.end(origin: origin) { snapshot in
                results.withLock { $0[worker.id] = snapshot }
                group.leave()
            }
        }
        _ = group.wait(timeout: .now() + timeout)
        let done = results.withLock { $0 }
        return list.map { ($0.id, done[$0.id]) }
    }
}

extension Worker {
    /// Whether this thread holds source (`kind` "source") or timer `itemId`.
    public func holds(_ kind: String, _ itemId: String) -> Bool {
        book.withLock { b in kind == "timer" ? b.timers[itemId] != nil : b.sources[itemId] != nil }
    }
}
