import CLinux
import CoreFoundation
import Foundation
import Primitives
import Synchronization

/// A thread that owns one `CFRunLoop` and runs it by a `RunPolicy`.
///
/// Threads: the worker's own thread runs the loop (run styles, callouts,
/// selectors); any other thread may call the public methods, which reach the
/// loop only through CF's thread-safe calls (add/remove, signal, wake-up,
/// stop) or by queueing performs. State: every piece of bookkeeping is one
/// `WorkerBook` behind one lock (`book`); CF calls, callbacks, events and
/// other locks come after the lock is released, never inside a `withLock`
/// body (records that leave the book are handed out of the closure too, so
/// their last release, and the CF object it frees, happens after it).
///
/// The worker is split by concern: this file (thread, loop, run styles,
/// control, snapshot), `Worker+Timers`, `Worker+Sources`, `Worker+Observers`,
/// `Worker+Perform`, `Worker+Tasks`.
public final class Worker: Sendable {
    /// Id (`t1`, …), never reused in a process.
    public let id: String
    /// The requested name.
    public let name: String
    /// The Linux thread name: the name's first 15 bytes.
    public let threadName: String
    /// The keep-alive.
    public let keepAlive: KeepAlive
    /// The run policy.
    public let policy: RunPolicy
    /// When the worker was created.
    public let createdAt = Date()

    let limits: Limits
    let selectors: SelectorRegistry
    /// Where ids of timers, sources, observers and performs come from.
    let ids: IdCounter
    /// The registry, for selectors that reach other workers.
    weak let registry: WorkerRegistry?
    let emit: @Sendable (RunLoopEvent) -> Void
    /// The one lock and everything it guards.
    let book: Locked<WorkerBook>
    /// The registry's explainer parts (options, warnings, watchdog).
    let diagnostics: LoopDiagnostics
    /// Turns as they happen; touched only by the worker's own thread.
    let tracer: LoopTracer
    /// The worker's slot in the stall watchdog (nil with tracing off).
    let watchSlot: Int?
    /// A worker made without a registry has explainer parts of its own, and
    /// stops their watchdog when its thread ends.
    private let ownsDiagnostics: Bool
    /// The keys (`code|subjects`) of this worker's warnings that may still be
    /// active, and their count: zero lets the hot paths (every source fire,
    /// every perform's answer) skip resolving without taking a lock, and a
    /// key lookup keeps them off the warning table otherwise.
    let openWarnings = Locked<Set<String>>([])
    let warned = Atomic<Int>(0)
    /// The loop thread's kernel id (0 until it starts): its scheduling can
    /// be read in `/proc/self/task/<id>`.
    let osThreadId = Atomic<Int32>(0)
    /// `WorkerBook.livelocked`, readable without the lock (the loop's
    /// `beforeWaiting` looks at it on every sleep).
    let livelockFlag = Atomic<Bool>(false)

    /// The worker's run loop while its thread lives; `nil` once the thread has
    /// ended: the worker then lets go of the loop so CF can free it and close
    /// its descriptors (an eventfd, plus an epoll set and a timerfd per mode).
    public var runLoop: CFRunLoop! { book.withLock { $0.loop } }

    /// Starts a worker thread and returns once its loop exists. Prefer
    /// `WorkerRegistry.createWorker`, which also assigns ids and enforces limits.
    public init(
        id: String, options: WorkerOptions, limits: Limits = Limits(), selectors: SelectorRegistry,
        registry: WorkerRegistry? = nil, ids: IdCounter? = nil, diagnostics: LoopDiagnostics? = nil,
        events: @escaping @Sendable (RunLoopEvent) -> Void = { _ in }
    ) throws(RunLoopError) {
        self.id = id
        let requested = options.name ?? id
        self.name = requested
        self.threadName = Worker.truncatedThreadName(requested)
        self.keepAlive = options.keepAlive
        self.policy = options.policy
        self.limits = limits
        self.selectors = selectors
        self.registry = registry
        self.ids = ids ?? registry?.ids ?? IdCounter()
        self.emit = events
        let shared = diagnostics ?? registry?.diagnostics
        let diagnostics = shared ?? LoopDiagnostics(events: events)
        self.diagnostics = diagnostics
        self.ownsDiagnostics = shared == nil
        self.book = Locked(
            WorkerBook(limits: limits, diagnostics: diagnostics.options, turnRingSize: options.turnRingSize))
        self.tracer = LoopTracer(maxCallouts: diagnostics.options.maxCalloutsPerTurn)
        self.watchSlot = diagnostics.options.tracing ? diagnostics.watchdog.register(thread: id) : nil
        try start()
    }

    /// A Linux thread name holds 15 bytes: cut at a character boundary.
    static func truncatedThreadName(_ name: String) -> String {
        var result = ""
        for character in name {
            if result.utf8.count + String(character).utf8.count > 15 { break }
            result.append(character)
        }
        return result
    }

    // MARK: - Thread life

    private func start() throws(RunLoopError) {
        let ready = DispatchSemaphore(value: 0)
        try LoopThread.spawn(stackBytes: limits.threadStackBytes) { [self] in threadMain(ready: ready) }
        ready.wait()
    }

    /// The loop thread's objects that live as long as the thread.
    private struct LoopObjects {
        var keepAlivePort: UserSource?
        var keepAliveTimer: TimerRecord?
        var taskObserver: CFRunLoopObserver?
        var entryObserver: CFRunLoopObserver?
        var sleepObserver: CFRunLoopObserver?
    }

    private func threadMain(ready: DispatchSemaphore) {
        _ = threadName.withCString { clinux_set_thread_name($0) }
        osThreadId.store(clinux_gettid(), ordering: .relaxed)
        noteStack()
        let loop: CFRunLoop = CFRunLoopGetCurrent()
        var objects = LoopObjects()
        installKeepAlive(on: loop, into: &objects)
        objects.taskObserver = installTaskObserver(on: loop)
        // First of all observers: `entry` (a stop that came early) and, when
        // tracing, `afterWaiting` (a turn begins). Last of all: `beforeWaiting`
        // (the turn ends, after the idle-task observer ran its task).
        let tracing = diagnostics.options.tracing
        let headMask: Activities = tracing ? [.entry, .afterWaiting] : .entry
        let entryObserver = CFRunLoopObserverCreateWithHandler(
            kCFAllocatorDefault, headMask.rawValue, true, Int.min
        ) { [weak self] _, activity in
            if activity.rawValue == Activities.entry.rawValue { self?.runEntered() } else { self?.loopWoke() }
        }
        objects.entryObserver = entryObserver
        let sleepObserver =
            tracing
            ? CFRunLoopObserverCreateWithHandler(
                kCFAllocatorDefault, Activities.beforeWaiting.rawValue, true, Int.max
            ) { [weak self] _, _ in
                self?.loopSleeps()
            } : nil
        objects.sleepObserver = sleepObserver
        let me = pthread_self()
        book.withLock {
            $0.loop = loop
            $0.thread = me
            $0.entryObserver = entryObserver
            $0.sleepObserver = sleepObserver
        }
        ready.signal()
        emit(.thread(snapshot, change: .created))
        if policy.style.endsThread && keepAlive == .none {
            warn(
                .loopCannotWake, severity: "warning", subjects: [policy.keepAliveMode.name],
                message:
                    "\(id) runs \(policy.style.cocoaName) with keepAlive none: its mode \(policy.keepAliveMode.name) is empty, so the run finishes at once and the thread ends at birth",
                details: ["mode": .string(policy.keepAliveMode.name)])
        }

        switch policy.style {
        case .loop: runLoopStyle()
        case .forever: runForeverStyle()
        case .manual: runManualStyle()
        case .run: runCocoaStyle(until: nil)
        case .runUntilDate: runCocoaStyle(until: Monotonic.now() + policy.seconds)
        case .runModeOnce: _ = runOnce(mode: policy.mode, seconds: policy.seconds, true)
        }
        teardown(objects)
    }

    /// The keep-alive is a real, listed item (role `keepAlive`): a port source
    /// on an eventfd nobody writes, or a repeating timer that fires once a
    /// day. A user can see it and remove it (the AFNetworking 2 lesson).
    private func installKeepAlive(on loop: CFRunLoop, into objects: inout LoopObjects) {
        let mode = policy.keepAliveMode
        switch keepAlive {
        case .port:
            guard let port = try? makeSource(SourceSpec(kind: .port, mode: mode, role: .keepAlive)) else { return }
            objects.keepAlivePort = port
            let pruned = book.withLock { b in
                b.keepAliveItem = port.id
                b.filled(mode.name)
                return b.sources.insert(port, id: port.id)
            }
            _ = pruned  // released after the lock
            CFRunLoopAddSource(loop, port.source, mode.cfMode)
        case .timer:
            var spec = TimerSpec(interval: 86_400, mode: mode)
            spec.role = .keepAlive
            let timerId = ids.next("tm")
            let record = TimerRecord(
                id: timerId, spec: spec, window: 16, onFire: { _, _, _ in },
                onInvalid: { [weak self] how in
                    self?.book.withLock { b in
                        b.removed("timer", timerId, how: "(the keep-alive timer) \(how)", from: mode.name)
                    }
                })
            objects.keepAliveTimer = record
            let pruned = book.withLock { b in
                b.keepAliveItem = timerId
                b.filled(mode.name)
                return b.timers.insert(record, id: timerId)
            }
            _ = pruned  // released after the lock
            CFRunLoopAddTimer(loop, record.timer, mode.cfMode)
        case .none:
            break
        }
    }

    private func teardown(_ objects: LoopObjects) {
        objects.keepAlivePort?.invalidate()
        objects.keepAliveTimer?.invalidate()
        if let observer = objects.taskObserver { CFRunLoopObserverInvalidate(observer) }
        if let observer = objects.entryObserver { CFRunLoopObserverInvalidate(observer) }
        if let observer = objects.sleepObserver { CFRunLoopObserverInvalidate(observer) }
        if let slot = watchSlot { diagnostics.watchdog.unregister(slot) }
        if ownsDiagnostics { diagnostics.shutdown() }
        let (timers, sources, observers, performs, stops, manual) = book.withLock { b in
            // From here every new call is refused (`checkAlive`), so nothing is
            // queued behind the answers given below.
            b.closing = true
            b.entryObserver = nil
            b.sleepObserver = nil
            defer {
                b.stopWaiters.removeAll()
                b.manualRequest = nil
            }
            return (
                b.timers.all, b.sources.all, b.observers.all, b.performs.removeAll(), b.stopWaiters.map(\.reply),
                b.manualRequest
            )
        }

        for timer in timers { timer.invalidate() }
        for source in sources { source.invalidate() }
        for observer in observers { observer.invalidate() }
        for carrier in performs.carriers { CFRunLoopSourceInvalidate(carrier.source) }
        for timer in performs.timers { CFRunLoopTimerInvalidate(timer) }
        for request in performs.requests {
            answer(request, .failure(Worker.endedError(id)), queuedMs: 0, ranMs: 0)
        }
        for reply in stops { reply(.failure(Worker.endedError(id))) }
        manual?.reply(.failure(Worker.endedError(id)))
        // The event goes out before the worker reads as exited: whoever sees
        // `hasExited` can count on the event.
        let endedAt = Date()
        var final = snapshot
        final.state = .exited
        final.endedAt = endedAt
        emit(.thread(final, change: .exited))
        // Whatever it warned about ended with it (the warnings stay listed).
        diagnostics.warnings.resolve(thread: id) {
            $0.code != WarningCode.loopCannotWake.rawValue || !self.policy.style.endsThread
        }
        // CF's thread-exit destructor releases its own reference; with ours gone
        // too the loop is freed and its descriptors closed. Ours is taken out
        // of the book and dropped after the lock: if it were the last one, CF
        // would free the loop (cancel routines and all) inside it.
        let released = book.withLock { b in
            b.exited = true
            b.endedAt = endedAt
            b.utilization.until = Monotonic.now()
            defer { b.loop = nil }
            return b.loop
        }
        book.notifyAll()
        _ = released
    }

    static func endedError(_ id: String) -> RunLoopError {
        RunLoopError(kind: .gone, code: .threadEnded, message: "thread \(id) ended before the work ran")
    }

    static func exitedError(_ id: String) -> RunLoopError {
        .conflict(.threadExited, "thread \(id) has exited")
    }

    /// Records that something was added to the loop (after the CF call adding
    /// it): a parked loop worker runs again.
    func touch() {
        book.withLock { $0.touch() }
        book.notifyAll()
    }

    // MARK: - Reading

    /// A consistent view of the worker.
    public var snapshot: WorkerSnapshot {
        var (snapshot, loop) = book.withLock { b in
            let inRun = !b.runStack.isEmpty
            let snapshot = WorkerSnapshot(
                id: id, name: name, threadName: threadName, threadNameTruncated: threadName != name,
                state: b.exited ? .exited : (inRun ? .running : .idle), currentMode: b.runStack.last?.mode,
                depth: b.runStack.count, keepAlive: keepAlive, policy: policy, runs: b.runs, exits: b.exits,
                lastExit: b.lastExit, parked: b.parked, timers: b.liveTimers,
                timerFires: b.timerFires, sources: b.sources.liveCount,
                keepAliveItem: b.keepAliveItem,
                observers: b.observers.liveCount, tasks: b.tasks.entries.count,
                pendingPerforms: b.performs.queued.map(\.snapshot), createdAt: createdAt, endedAt: b.endedAt,
                ending: b.cancelled, endOrigin: b.endOrigin, stackUsedBytes: b.stackUsedMax,
                stackBytes: Int(b.stackHigh - b.stackLow), depthMax: b.depthMax, livelocked: b.livelocked)
            return (snapshot, b.loop)
        }
        if snapshot.state == .running, let loop, CFRunLoopIsWaiting(loop) { snapshot.state = .waiting }
        return snapshot
    }

    /// Whether `end` was asked (the thread may still be finishing).
    public var isEnding: Bool { book.withLock { $0.cancelled } }

    /// Whether the thread has ended.
    public var hasExited: Bool { book.withLock { $0.exited } }

    // MARK: - Control

    /// `CFRunLoopWakeUp`.
    public func wakeUp() throws(RunLoopError) {
        guard let loop = book.withLock({ $0.exited ? nil : $0.loop }) else { throw Worker.exitedError(id) }
        CFRunLoopWakeUp(loop)
    }

    /// Ends the worker: cancel flag, keep-alive removed, every run stopped, the
    /// thread joined. `completion` gets the final snapshot (with the final exit)
    /// once joined, on a background thread.
    public func end(origin: StopOrigin = .threadEnding, completion: (@Sendable (WorkerSnapshot) -> Void)? = nil) {
        enum Step {
            case joined
            case waitForJoin
            case end(modes: Set<String>, loop: CFRunLoop?, thread: pthread_t?)
        }
        let step: Step = book.withLock { b in
            if b.joined { return .joined }
            if let completion { b.endWaiters.append(completion) }
            guard !b.cancelled else { return .waitForJoin }
            b.cancelled = true
            b.endOrigin = origin
            return .end(
                modes: Set(b.runStack.map(\.mode) + [policy.mode.name, "default"]), loop: b.loop, thread: b.thread)
        }
        book.notifyAll()
        guard case .end(let modes, let loop, let thread) = step else {
            if case .joined = step { completion?(snapshot) }
            return
        }
        emit(.thread(snapshot, change: .ending))

        if let loop {
            // A stop is lost if it lands between two runs, so queue it as a block
            // in every mode the thread may be in: the next turn of any run stops.
            for name in modes where name != "common" {
                guard let mode = try? RunLoopMode(name) else { continue }
                CFRunLoopPerformBlock(loop, mode.cfMode) {
                    if let current = CFRunLoopGetCurrent() { CFRunLoopStop(current) }
                }
            }
            CFRunLoopStop(loop)
            CFRunLoopWakeUp(loop)
        }
        DispatchQueue.global().async { [self] in
            if let thread {
                var result: UnsafeMutableRawPointer?
                pthread_join(thread, &result)
            }
            let waiters = book.withLock { b in
                b.joined = true
                defer { b.endWaiters.removeAll() }
                return b.endWaiters
            }
            let final = snapshot
            for waiter in waiters { waiter(final) }
        }
    }

    /// Ends the worker and blocks until its thread is joined or `timeout` passes.
    /// Returns the final snapshot, or nil on timeout.
    @discardableResult
    public func endAndWait(timeout: Double = 30, origin: StopOrigin = .threadEnding) -> WorkerSnapshot? {
        let final = Locked<WorkerSnapshot?>(nil)
        end(origin: origin) { snapshot in
            final.withLock { $0 = snapshot }
            final.notifyAll()
        }
        return final.withLock(when: { $0 != nil }, timeout: timeout) { snapshot, _ in snapshot }
    }
}
