import CLinux
import CoreFoundation
import Foundation

/// A thread that owns one `CFRunLoop` and runs it by a `RunPolicy`.
///
/// Other threads reach the loop only through CF's thread-safe calls
/// (add/remove sources and timers, signal, wake-up, stop) or by posting work
/// through the worker's command sources. Every piece of bookkeeping sits behind
/// one lock, so a `snapshot` read from any thread is consistent.
public final class Worker: @unchecked Sendable {
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
    /// The worker's run loop while its thread lives; `nil` once the thread has
    /// ended: the worker then lets go of the loop so CF can free it and close
    /// its descriptors (an eventfd, plus an epoll set and a timerfd per mode).
    public var runLoop: CFRunLoop! {
        loopLock.lock()
        defer { loopLock.unlock() }
        return loopStorage
    }
    private var loopStorage: CFRunLoop?
    private let loopLock = NSLock()

    let limits: Limits
    let selectors: SelectorRegistry
    weak var registry: WorkerRegistry?
    private let emit: @Sendable (RunLoopEvent) -> Void

    // MARK: state, all guarded by `cond`
    private let cond = NSCondition()
    private var runSeq = 0
    private var runStack: [RunFrame] = []
    private var runs = 0
    private var exits: [ExitReason: Int] = [:]
    private var lastExit: RunExit?
    private var stopWaiters: [(seq: Int, reply: @Sendable (Result<RunExit, RunLoopError>) -> Void)] = []
    private var cancelled = false
    private var exited = false
    private var endedAt: Date?
    private var parked = false
    private var generation = 0
    private var manualRequest: ManualRun?
    private var timers: [String: TimerRecord] = [:]
    private var timerOrder: [String] = []
    /// Timers that can still fire (kept by the timers' `onInvalid`).
    private var liveTimers = 0
    private var sources: [String: UserSource] = [:]
    private var sourceOrder: [String] = []
    private var observers: [String: ObserverRecord] = [:]
    private var observerOrder: [String] = []
    private var activity: Ring<ActivityRecord>
    private var activitySeq: UInt64 = 0
    private var logLines: Ring<String>
    private var counters: [String: Int] = [:]
    private var commonModes: [String] = ["default"]
    private var pending: [PerformRequest] = []
    private var delayed: [PerformRequest] = []
    private var taskQueue: TaskQueue
    private var endWaiters: [@Sendable (WorkerSnapshot) -> Void] = []
    private var joined = false

    // MARK: loop-thread objects
    private var thread = pthread_t()
    private var keepAlivePort: KeepAlivePort?
    private var keepAliveTimer: CFRunLoopTimer?
    private var taskObserver: CFRunLoopObserver?
    /// Per-mode command sources carrying performs; guarded by `memberLock`.
    private var performSources: [String: (source: CommandSource<PerformRequest>, inLoop: Bool)] = [:]
    private let memberLock = NSLock()

    /// One run under way. `entered` turns true when CF notifies `entry`, i.e.
    /// once the run's own stop flag exists: a stop asked before that is kept in
    /// `stopRequested` and applied at entry, so it is never lost in the gap
    /// between deciding to run and CF starting the run.
    private struct RunFrame {
        var seq: Int
        var mode: String
        var entered = false
        var stopRequested = false
    }

    /// The internal `entry` observer (loop thread only) and the modes it is in.
    private var entryObserver: CFRunLoopObserver?
    private var entryObserverModes = Set<String>()

    private struct ManualRun {
        var mode: RunLoopMode
        var seconds: Double
        var returnAfterSourceHandled: Bool
        var reply: @Sendable (Result<RunExit, RunLoopError>) -> Void
    }

    /// Starts a worker thread and returns once its loop exists. Prefer
    /// `WorkerRegistry.createWorker`, which also assigns ids and enforces limits.
    public init(
        id: String, options: WorkerOptions, limits: Limits = Limits(), selectors: SelectorRegistry,
        registry: WorkerRegistry? = nil, events: @escaping @Sendable (RunLoopEvent) -> Void = { _ in }
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
        self.emit = events
        self.activity = Ring(capacity: limits.activityRingSize)
        self.logLines = Ring(capacity: limits.logRingSize)
        self.taskQueue = TaskQueue(capacity: limits.taskCapacity)
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
        let box = Unmanaged.passRetained(StartBox(worker: self, ready: ready))
        let status = pthread_create(
            &thread, nil,
            { raw in
                guard let raw else { return nil }
                let box = Unmanaged<StartBox>.fromOpaque(raw).takeRetainedValue()
                box.worker.threadMain(ready: box.ready)
                return nil
            }, box.toOpaque())
        guard status == 0 else {
            box.release()
            throw RunLoopError.limit(
                "thread_create_failed", "pthread_create failed: \(String(cString: strerror(status)))")
        }
        ready.wait()
    }

    private final class StartBox: @unchecked Sendable {
        let worker: Worker
        let ready: DispatchSemaphore
        init(worker: Worker, ready: DispatchSemaphore) {
            self.worker = worker
            self.ready = ready
        }
    }

    private func threadMain(ready: DispatchSemaphore) {
        _ = threadName.withCString { clinux_set_thread_name($0) }
        let loop: CFRunLoop = CFRunLoopGetCurrent()
        loopLock.lock()
        loopStorage = loop
        loopLock.unlock()
        installKeepAlive(on: loop)
        installTaskObserver(on: loop)
        entryObserver = CFRunLoopObserverCreateWithHandler(
            kCFAllocatorDefault, CFOptionFlags(Activity.entry.bit), true, Int.min
        ) { [weak self] _, _ in
            self?.runEntered()
        }
        ready.signal()
        emit(.thread(snapshot, change: "created"))

        switch policy.style {
        case .loop: runLoopStyle()
        case .forever: runForeverStyle()
        case .manual: runManualStyle()
        }
        teardown(loop: loop)
    }

    private func runLoopStyle() {
        while true {
            cond.lock()
            if cancelled {
                cond.unlock()
                return
            }
            let seen = generation
            cond.unlock()
            let exit = runOnce(mode: policy.mode, seconds: policy.seconds, policy.returnAfterSourceHandled)
            guard exit.reason == .finished else { continue }
            // CF answers `finished` at once, every time, for an empty mode: park
            // instead of spinning, until something is added or the worker ends.
            cond.lock()
            if !cancelled && generation == seen {
                parked = true
                cond.unlock()
                emit(.thread(snapshot, change: "parked"))
                cond.lock()
                while !cancelled && generation == seen { cond.wait() }
                parked = false
                cond.unlock()
                emit(.thread(snapshot, change: "unparked"))
            } else {
                cond.unlock()
            }
        }
    }

    private func runForeverStyle() {
        // Exactly what CFRunLoopRun() does (a loop of default-mode runs until one
        // is stopped or finished), spelled out so every inner result is recorded.
        while true {
            let exit = runOnce(mode: .default, seconds: 1.0e10, false)
            if exit.reason == .stopped || exit.reason == .finished { return }
            cond.lock()
            let done = cancelled
            cond.unlock()
            if done { return }
        }
    }

    private func runManualStyle() {
        while true {
            cond.lock()
            while !cancelled && (manualRequest == nil || runStack.count > 0) { cond.wait() }
            guard !cancelled, let request = manualRequest else {
                let leftover = manualRequest
                manualRequest = nil
                cond.unlock()
                leftover?.reply(.failure(Worker.endedError(id)))
                return
            }
            cond.unlock()
            let exit = runOnce(mode: request.mode, seconds: request.seconds, request.returnAfterSourceHandled)
            cond.lock()
            manualRequest = nil
            cond.unlock()
            request.reply(.success(exit))
        }
    }

    /// One `CFRunLoopRunInMode` call on this thread, recorded. Nested calls (from
    /// a selector) are recorded too, each with its own exit reason.
    func runOnce(mode: RunLoopMode, seconds: Double, _ returnAfterSourceHandled: Bool) -> RunExit {
        cond.lock()
        runSeq += 1
        let seq = runSeq
        let depth = runStack.count
        runStack.append(RunFrame(seq: seq, mode: mode.name))
        cond.unlock()
        if let observer = entryObserver, !entryObserverModes.contains(mode.name), let loop = CFRunLoopGetCurrent() {
            CFRunLoopAddObserver(loop, observer, mode.cfMode)
            entryObserverModes.insert(mode.name)
        }

        let started = Monotonic.now()
        let raw = CFRunLoopRunInMode(mode.cfMode, seconds, returnAfterSourceHandled)
        let duration = Monotonic.now() - started
        // CF returns one of the four documented results; anything else would be a
        // CF bug, reported as `finished` only because the run did return.
        let reason = ExitReason(raw) ?? .finished

        cond.lock()
        runStack.removeLast()
        runs += 1
        exits[reason, default: 0] += 1
        let exit = RunExit(
            reason: reason, mode: mode.name, duration: duration, endedAt: Date(), run: seq, depth: depth)
        lastExit = exit
        let waiting = stopWaiters.filter { $0.seq == seq }
        stopWaiters.removeAll { $0.seq == seq }
        let stopOuter = cancelled && !runStack.isEmpty
        cond.broadcast()
        cond.unlock()

        for waiter in waiting { waiter.reply(.success(exit)) }
        emit(.runExit(thread: id, exit: exit))
        if stopOuter, let loop = CFRunLoopGetCurrent() { CFRunLoopStop(loop) }
        return exit
    }

    /// The `entry` observer: the innermost run now has its stop flag; apply a
    /// stop that arrived before it did.
    private func runEntered() {
        cond.lock()
        guard !runStack.isEmpty else {
            cond.unlock()
            return
        }
        runStack[runStack.count - 1].entered = true
        let stopNow = runStack[runStack.count - 1].stopRequested
        cond.unlock()
        if stopNow, let loop = CFRunLoopGetCurrent() { CFRunLoopStop(loop) }
    }

    private func installKeepAlive(on loop: CFRunLoop) {
        let mode = policy.style == .forever ? RunLoopMode.default : policy.mode
        switch keepAlive {
        case .port:
            if let port = KeepAlivePort() {
                keepAlivePort = port
                CFRunLoopAddSource(loop, port.source, mode.cfMode)
            }
        case .timer:
            let timer = CFRunLoopTimerCreateWithHandler(
                kCFAllocatorDefault, CFAbsoluteTimeGetCurrent() + 86_400, 86_400, 0, 0
            ) { _ in }
            keepAliveTimer = timer
            CFRunLoopAddTimer(loop, timer, mode.cfMode)
        case .none:
            break
        }
    }

    private func removeKeepAlive() {
        keepAlivePort?.invalidate()
        keepAlivePort = nil
        if let timer = keepAliveTimer { CFRunLoopTimerInvalidate(timer) }
        keepAliveTimer = nil
    }

    private func installTaskObserver(on loop: CFRunLoop) {
        let observer = CFRunLoopObserverCreateWithHandler(
            kCFAllocatorDefault, CFOptionFlags(Activity.beforeWaiting.bit), true, Int.max
        ) { [weak self] _, _ in
            self?.runOneTask()
        }
        taskObserver = observer
        CFRunLoopAddObserver(loop, observer, kCFRunLoopCommonModes)
        if !policy.mode.isCommon && policy.mode != .default {
            CFRunLoopAddObserver(loop, observer, policy.mode.cfMode)
        }
    }

    private func teardown(loop: CFRunLoop) {
        removeKeepAlive()
        if let observer = taskObserver { CFRunLoopObserverInvalidate(observer) }
        if let observer = entryObserver { CFRunLoopObserverInvalidate(observer) }
        cond.lock()
        exited = true
        endedAt = Date()
        let allTimers = timers.values
        let allSources = sources.values
        let allObservers = observers.values
        let unanswered = pending + delayed
        pending.removeAll()
        delayed.removeAll()
        let stops = stopWaiters
        stopWaiters.removeAll()
        let manual = manualRequest
        manualRequest = nil
        cond.broadcast()
        cond.unlock()

        for timer in allTimers { timer.invalidate() }
        for source in allSources { source.invalidate() }
        for observer in allObservers { observer.invalidate() }
        memberLock.lock()
        let carriers = performSources.values.map(\.source)
        performSources.removeAll()
        memberLock.unlock()
        for carrier in carriers { carrier.invalidate() }
        for request in unanswered {
            if let timer = request.timer { CFRunLoopTimerInvalidate(timer) }
            request.timer = nil
            answer(request, .failure(Worker.endedError(id)), queuedMs: 0, ranMs: 0)
        }
        for waiter in stops { waiter.reply(.failure(Worker.endedError(id))) }
        manual?.reply(.failure(Worker.endedError(id)))
        emit(.thread(snapshot, change: "exited"))
        // CF's thread-exit destructor releases its own reference; with ours gone
        // too the loop is freed and its descriptors closed.
        loopLock.lock()
        loopStorage = nil
        loopLock.unlock()
    }

    static func endedError(_ id: String) -> RunLoopError {
        RunLoopError(kind: .gone, code: "thread_ended", message: "thread \(id) ended before the work ran")
    }

    private func exitedError() -> RunLoopError {
        .conflict("thread_exited", "thread \(id) has exited")
    }

    /// Call with `cond` held: throws when the worker is ending or gone.
    private func checkAliveLocked() throws(RunLoopError) {
        if exited || cancelled { throw exitedError() }
    }

    /// Something was added to the loop: a parked loop worker runs again.
    private func touchLocked() {
        generation &+= 1
        cond.broadcast()
    }

    /// `touchLocked` for callers that just made the CF call adding the item.
    /// It must come after that call: a parked worker woken before the item is
    /// in the loop would find the mode still empty, get `finished` and park
    /// again with the new generation, never to see the item.
    private func touch() {
        cond.lock()
        touchLocked()
        cond.unlock()
    }

    // MARK: - Reading

    /// A consistent view of the worker.
    public var snapshot: WorkerSnapshot {
        let loop = runLoop
        cond.lock()
        let inRun = !runStack.isEmpty
        var snapshot = WorkerSnapshot(
            id: id, name: name, threadName: threadName, threadNameTruncated: threadName != name,
            state: exited ? .exited : (inRun ? .running : .idle), currentMode: runStack.last?.mode,
            depth: runStack.count, keepAlive: keepAlive, policy: policy, runs: runs, exits: exits,
            lastExit: lastExit, parked: parked, timers: liveTimers,
            sources: sources.values.filter(\.isValid).count, observers: observers.values.filter(\.isValid).count,
            tasks: taskQueue.entries.count, pendingPerforms: (pending + delayed).map(\.snapshot),
            createdAt: createdAt, endedAt: endedAt, ending: cancelled)
        cond.unlock()
        if snapshot.state == .running, let loop, CFRunLoopIsWaiting(loop) { snapshot.state = .waiting }
        return snapshot
    }

    /// Whether `end` was asked (the thread may still be finishing).
    public var isEnding: Bool {
        cond.lock()
        defer { cond.unlock() }
        return cancelled
    }

    /// Whether the thread has ended.
    public var hasExited: Bool {
        cond.lock()
        defer { cond.unlock() }
        return exited
    }

    // MARK: - Control

    /// `CFRunLoopStop`: `reply` gets the exit of the run it ended, when that run
    /// returns. With no run under way CF keeps no flag and the stop would do
    /// nothing, so the reply is a `not_running` conflict at once.
    public func stop(reply: @escaping @Sendable (Result<RunExit, RunLoopError>) -> Void) {
        cond.lock()
        if exited {
            cond.unlock()
            reply(.failure(exitedError()))
            return
        }
        guard let innermost = runStack.last else {
            cond.unlock()
            reply(
                .failure(
                    .conflict(
                        "not_running",
                        "thread \(id) is not inside a run; CFRunLoopStop would do nothing (CF keeps no stop flag)")))
            return
        }
        stopWaiters.append((innermost.seq, reply))
        guard innermost.entered else {
            // CF has not started this run yet: its entry observer stops it.
            runStack[runStack.count - 1].stopRequested = true
            cond.unlock()
            return
        }
        cond.unlock()
        if let loop = runLoop { CFRunLoopStop(loop) }
    }

    /// `CFRunLoopWakeUp`.
    public func wakeUp() throws(RunLoopError) {
        cond.lock()
        let gone = exited
        cond.unlock()
        guard !gone, let loop = runLoop else { throw exitedError() }
        CFRunLoopWakeUp(loop)
    }

    /// Runs a manual worker's loop once; `reply` gets that run's exit.
    public func run(
        mode: RunLoopMode, seconds: Double, returnAfterSourceHandled: Bool,
        reply: @escaping @Sendable (Result<RunExit, RunLoopError>) -> Void
    ) throws(RunLoopError) {
        guard !mode.isCommon else {
            throw .badValue("mode", "a loop runs in one mode; common is a set of modes, not a mode to run in")
        }
        try limits.checkSeconds(seconds, field: "seconds")
        cond.lock()
        defer { cond.unlock() }
        try checkAliveLocked()
        guard policy.style == .manual else {
            throw .conflict(
                "not_manual",
                "thread \(id) runs its loop itself (style \(policy.style.rawValue)); only manual threads run on request"
            )
        }
        guard manualRequest == nil else {
            throw .conflict("already_running", "thread \(id) is already running a requested run")
        }
        manualRequest = ManualRun(
            mode: mode, seconds: seconds, returnAfterSourceHandled: returnAfterSourceHandled, reply: reply)
        cond.broadcast()
    }

    /// Ends the worker: cancel flag, keep-alive removed, every run stopped, the
    /// thread joined. `completion` gets the final snapshot (with the final exit)
    /// once joined, on a background thread.
    public func end(completion: (@Sendable (WorkerSnapshot) -> Void)? = nil) {
        cond.lock()
        if joined {
            cond.unlock()
            completion?(snapshot)
            return
        }
        if let completion { endWaiters.append(completion) }
        let first = !cancelled
        cancelled = true
        cond.broadcast()
        let modes = Set(runStack.map(\.mode) + [policy.mode.name, "default"])
        cond.unlock()
        guard first else { return }
        emit(.thread(snapshot, change: "ending"))

        if let loop = runLoop {
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
        let thread = self.thread
        DispatchQueue.global().async { [self] in
            var result: UnsafeMutableRawPointer?
            pthread_join(thread, &result)
            cond.lock()
            joined = true
            let waiters = endWaiters
            endWaiters.removeAll()
            cond.unlock()
            let final = snapshot
            for waiter in waiters { waiter(final) }
        }
    }

    /// Ends the worker and blocks until its thread is joined or `timeout` passes.
    /// Returns the final snapshot, or nil on timeout.
    @discardableResult
    public func endAndWait(timeout: Double = 30) -> WorkerSnapshot? {
        let done = DispatchSemaphore(value: 0)
        let box = ResultBox<WorkerSnapshot>()
        end { snapshot in
            box.set(snapshot)
            done.signal()
        }
        guard done.wait(timeout: .now() + timeout) == .success else { return nil }
        return box.get()
    }

    // MARK: - Timers

    /// Adds a `CFRunLoopTimer` to the loop in `spec.mode`.
    public func addTimer(_ spec: TimerSpec) throws(RunLoopError) -> TimerSnapshot {
        try limits.checkSeconds(spec.interval, field: "interval", positive: true)
        if let delay = spec.delay { try limits.checkSeconds(delay, field: "delay") }
        try limits.checkSeconds(spec.tolerance, field: "tolerance")
        if let maxFires = spec.maxFires, maxFires < 1 { throw .badValue("maxFires", "maxFires must be >= 1") }
        var checked = spec
        if let action = spec.action { checked.action = try selectors.validate(action, field: "action") }
        cond.lock()
        do throws(RunLoopError) {
            try checkAliveLocked()
            // A counter, not a scan: adding the n-th timer must not cost O(n).
            guard liveTimers < limits.maxTimersPerWorker else {
                throw .limit(
                    "too_many_timers",
                    "thread \(id) already has \(liveTimers) timers (limit \(limits.maxTimersPerWorker))")
            }
        } catch {
            cond.unlock()
            throw error
        }
        let timerId = registry?.nextId("tm") ?? "tm\(timers.count + 1)"
        let record = TimerRecord(
            id: timerId, spec: checked, window: limits.latenessWindow,
            onFire: { [weak self] record, fires, late in self?.timerFired(record, fires: fires, lateness: late) },
            onInvalid: { [weak self] in self?.timerInvalidated() })
        liveTimers += 1
        timers[timerId] = record
        timerOrder.append(timerId)
        pruneLocked()
        cond.unlock()
        if let loop = runLoop { CFRunLoopAddTimer(loop, record.timer, checked.mode.cfMode) }
        touch()
        return record.snapshot
    }

    private func timerInvalidated() {
        cond.lock()
        liveTimers -= 1
        cond.unlock()
    }

    private func timerFired(_ record: TimerRecord, fires: Int, lateness: Double) {
        if let action = record.spec.action {
            switch runSelector(action) {
            case .success: record.recordActionError(nil)
            case .failure(let error): record.recordActionError(error.message)
            }
        }
        emit(.timer(thread: id, timer: record.id, fires: fires, latenessMs: lateness * 1000, valid: record.isValid))
    }

    /// Every timer, in creation order.
    public func timerSnapshots() -> [TimerSnapshot] {
        cond.lock()
        let list = timerOrder.compactMap { timers[$0] }
        cond.unlock()
        return list.map(\.snapshot)
    }

    /// `CFRunLoopTimerInvalidate` on one timer.
    public func invalidateTimer(_ timerId: String) throws(RunLoopError) -> TimerSnapshot {
        let record = try timerRecord(timerId)
        record.invalidate()
        return record.snapshot
    }

    /// One timer, by id (a lookup, not a scan of every timer).
    public func timerSnapshot(_ timerId: String) throws(RunLoopError) -> TimerSnapshot {
        try timerRecord(timerId).snapshot
    }

    private func timerRecord(_ timerId: String) throws(RunLoopError) -> TimerRecord {
        cond.lock()
        let record = timers[timerId]
        cond.unlock()
        guard let record else { throw .notFound("timer", timerId) }
        return record
    }

    /// Forgets invalidated timers and sources beyond the per-worker limits, so
    /// churn does not grow memory without bound. Call with `cond` held.
    private func pruneLocked() {
        if timerOrder.count > limits.maxTimersPerWorker * 2 {
            let dead = timerOrder.filter { timers[$0].map { !$0.isValid } ?? true }
            for timerId in dead.prefix(timerOrder.count - limits.maxTimersPerWorker) { timers[timerId] = nil }
            timerOrder.removeAll { timers[$0] == nil }
        }
        if sourceOrder.count > limits.maxSourcesPerWorker * 2 {
            let dead = sourceOrder.filter { sources[$0].map { !$0.isValid } ?? true }
            for sourceId in dead.prefix(sourceOrder.count - limits.maxSourcesPerWorker) { sources[sourceId] = nil }
            sourceOrder.removeAll { sources[$0] == nil }
        }
    }

    // MARK: - Sources

    /// Adds a custom (version-0) or port (version-1) source in `spec.mode`.
    public func addSource(_ spec: SourceSpec) throws(RunLoopError) -> SourceSnapshot {
        var checked = spec
        if let action = spec.action { checked.action = try selectors.validate(action, field: "action") }
        cond.lock()
        do throws(RunLoopError) {
            try checkAliveLocked()
            let valid = sources.values.filter(\.isValid).count
            guard valid < limits.maxSourcesPerWorker else {
                throw .limit(
                    "too_many_sources",
                    "thread \(id) already has \(valid) sources (limit \(limits.maxSourcesPerWorker))")
            }
        } catch {
            cond.unlock()
            throw error
        }
        let sourceId = registry?.nextId("s") ?? "s\(sources.count + 1)"
        cond.unlock()
        let record = try UserSource(id: sourceId, spec: checked, queueLimit: limits.portQueueSize) {
            [weak self] source, messages in
            self?.sourceFired(source, messages: messages)
        }
        cond.lock()
        sources[sourceId] = record
        sourceOrder.append(sourceId)
        pruneLocked()
        cond.unlock()
        if let loop = runLoop { CFRunLoopAddSource(loop, record.source, checked.mode.cfMode) }
        touch()
        return record.snapshot
    }

    private func sourceFired(_ source: UserSource, messages: [PortMessage]) {
        if let action = source.spec.action { _ = runSelector(action) }
        let snap = source.snapshot
        emit(
            .source(thread: id, source: source.id, kind: source.spec.kind, fired: snap.fired, messages: messages.count))
    }

    private func userSource(_ sourceId: String) throws(RunLoopError) -> UserSource {
        cond.lock()
        let record = sources[sourceId]
        cond.unlock()
        guard let record else { throw .notFound("source", sourceId) }
        return record
    }

    /// One source, by id.
    public func sourceSnapshot(_ sourceId: String) throws(RunLoopError) -> SourceSnapshot {
        try userSource(sourceId).snapshot
    }

    /// Every source, in creation order.
    public func sourceSnapshots() -> [SourceSnapshot] {
        cond.lock()
        let list = sourceOrder.compactMap { sources[$0] }
        cond.unlock()
        return list.map(\.snapshot)
    }

    /// `CFRunLoopSourceSignal` on a custom source, plus `CFRunLoopWakeUp` when `wakeUp`.
    public func signalSource(_ sourceId: String, wakeUp: Bool) throws(RunLoopError) -> SourceSnapshot {
        let record = try userSource(sourceId)
        guard record.spec.kind == .custom else {
            throw .conflict(
                "wrong_kind", "source \(sourceId) is a port source: send it a message instead", field: "sourceId")
        }
        guard record.isValid else { throw .conflict("source_invalid", "source \(sourceId) was invalidated") }
        guard let loop = runLoop else { throw exitedError() }
        record.signal(on: loop, wakeUp: wakeUp)
        return record.snapshot
    }

    /// Queues a message on a port source and rings its eventfd.
    public func sendMessage(toSource sourceId: String, msgid: Int, data: String) throws(RunLoopError)
        -> SourceSnapshot
    {
        let record = try userSource(sourceId)
        guard record.spec.kind == .port else {
            throw .conflict(
                "wrong_kind", "source \(sourceId) is a custom source: signal it instead", field: "sourceId")
        }
        guard data.utf8.count <= limits.maxMessageBytes else {
            throw .badValue("data", "data must be at most \(limits.maxMessageBytes) bytes")
        }
        try record.post(msgid: msgid, data: data)
        return record.snapshot
    }

    /// `CFRunLoopSourceInvalidate` (the cancel routine runs; a port's eventfd is
    /// closed after the source is gone).
    public func invalidateSource(_ sourceId: String) throws(RunLoopError) -> SourceSnapshot {
        let record = try userSource(sourceId)
        record.invalidate()
        return record.snapshot
    }

    // MARK: - Observers and modes

    /// Adds an observer; its activities go into the worker's ring.
    public func addObserver(_ spec: ObserverSpec) throws(RunLoopError) -> ObserverSnapshot {
        guard !spec.activities.isEmpty else { throw .badValue("activities", "name at least one activity") }
        cond.lock()
        do throws(RunLoopError) {
            try checkAliveLocked()
            let valid = observers.values.filter(\.isValid).count
            guard valid < limits.maxObserversPerWorker else {
                throw .limit(
                    "too_many_observers",
                    "thread \(id) already has \(valid) observers (limit \(limits.maxObserversPerWorker))")
            }
        } catch {
            cond.unlock()
            throw error
        }
        let observerId = registry?.nextId("ob") ?? "ob\(observers.count + 1)"
        let record = ObserverRecord(id: observerId, spec: spec) { [weak self] record, activity in
            self?.recordActivity(activity, observer: record.id)
        }
        observers[observerId] = record
        observerOrder.append(observerId)
        cond.unlock()
        if let loop = runLoop { CFRunLoopAddObserver(loop, record.observer, spec.mode.cfMode) }
        return record.snapshot
    }

    private func recordActivity(_ activity: Activity, observer: String) {
        let mode = RunLoopMode.name(ofCF: CFRunLoopCopyCurrentMode(CFRunLoopGetCurrent())) ?? "none"
        cond.lock()
        activitySeq += 1
        let record = ActivityRecord(seq: activitySeq, at: Date(), activity: activity, mode: mode, observer: observer)
        self.activity.append(record)
        cond.unlock()
        emit(.activity(thread: id, record: record))
    }

    /// `CFRunLoopObserverInvalidate` on one observer: it records nothing more.
    public func invalidateObserver(_ observerId: String) throws(RunLoopError) -> ObserverSnapshot {
        cond.lock()
        let record = observers[observerId]
        cond.unlock()
        guard let record else { throw .notFound("observer", observerId) }
        record.invalidate()
        return record.snapshot
    }

    /// Every observer, in creation order.
    public func observerSnapshots() -> [ObserverSnapshot] {
        cond.lock()
        let list = observerOrder.compactMap { observers[$0] }
        cond.unlock()
        return list.map(\.snapshot)
    }

    /// Recorded activities with a sequence number above `since`, oldest first.
    public func activities(since: UInt64 = 0) -> [ActivityRecord] {
        cond.lock()
        defer { cond.unlock() }
        return activity.items.filter { $0.seq > since }
    }

    /// Every mode, the common set and the current mode.
    public func modes() -> ModesSnapshot {
        var all: [String] = []
        if let loop = runLoop, let array = CFRunLoopCopyAllModes(loop) {
            for index in 0..<CFArrayGetCount(array) {
                let raw = CFArrayGetValueAtIndex(array, index)
                let string = unsafeBitCast(raw, to: CFString.self)
                all.append(RunLoopMode.name(ofCF: string) ?? "?")
            }
        }
        cond.lock()
        defer { cond.unlock() }
        return ModesSnapshot(all: all.sorted(), common: commonModes, current: runStack.last?.mode)
    }

    /// `CFRunLoopAddCommonMode`: items added to common modes now also live in `mode`.
    public func addCommonMode(_ mode: RunLoopMode) throws(RunLoopError) -> ModesSnapshot {
        guard !mode.isCommon else { throw .badValue("mode", "common is the set itself, not a mode to add to it") }
        cond.lock()
        do throws(RunLoopError) { try checkAliveLocked() } catch {
            cond.unlock()
            throw error
        }
        if !commonModes.contains(mode.name) { commonModes.append(mode.name) }
        cond.unlock()
        if let loop = runLoop { CFRunLoopAddCommonMode(loop, mode.cfMode) }
        touch()
        return modes()
    }

    // MARK: - Log and counters (selector state)

    /// Appends a line to the worker's log ring.
    public func appendLog(_ line: String) -> Int {
        cond.lock()
        defer { cond.unlock() }
        logLines.append(line)
        return logLines.items.count
    }

    /// The worker's log lines, oldest first.
    public var log: [String] {
        cond.lock()
        defer { cond.unlock() }
        return logLines.items
    }

    /// Adds `by` to the named counter; returns the new value.
    public func increment(_ counter: String, by: Int = 1) -> Int {
        cond.lock()
        defer { cond.unlock() }
        counters[counter, default: 0] += by
        return counters[counter] ?? 0
    }

    /// The named counters.
    public var counterValues: [String: Int] {
        cond.lock()
        defer { cond.unlock() }
        return counters
    }

    // MARK: - Perform

    /// Runs a validated selector call on the current thread (the worker's own).
    func runSelector(_ call: SelectorCall) -> Result<SelectorOutcome, RunLoopError> {
        guard let selector = selectors.selector(named: call.selector) else {
            return .failure(.notFound("selector", call.selector))
        }
        let context = SelectorContext(worker: self, registry: registry, args: call.args)
        do throws(RunLoopError) {
            return .success(try selector.body(context))
        } catch {
            return .failure(error)
        }
    }

    /// Queues a selector on this worker's loop (`performSelector:onThread:`).
    ///
    /// The call runs on the worker's thread, in order with other performs for
    /// the same modes, only while the loop runs in one of `spec.modes`; until
    /// then it is pending (listed on the worker). `completion` (if any) gets the
    /// result; with `timeout`, it gets `deadline_exceeded` once the time passes
    /// and the perform stays pending, exactly as CF would leave it.
    /// Returns the perform's id.
    @discardableResult
    public func perform(
        _ spec: PerformSpec, timeout: Double? = nil, completion: (@Sendable (PerformResult) -> Void)? = nil
    ) throws(RunLoopError) -> String {
        let call = try selectors.validate(spec.call)
        guard !spec.modes.isEmpty else { throw .badValue("modes", "name at least one mode") }
        try limits.checkSeconds(spec.afterDelay, field: "afterDelay")
        if let timeout { try limits.checkSeconds(timeout, field: "timeout") }
        var seen = Set<String>()
        let modes = spec.modes.filter { seen.insert($0.name).inserted }
        cond.lock()
        do throws(RunLoopError) {
            try checkAliveLocked()
            guard pending.count + delayed.count < limits.maxQueuedCommands else {
                throw .limit(
                    "queue_full",
                    "thread \(id) already has \(pending.count + delayed.count) queued performs (limit \(limits.maxQueuedCommands))"
                )
            }
        } catch {
            cond.unlock()
            throw error
        }
        let performId = registry?.nextId("p") ?? "p\(runs)-\(pending.count)"
        let request = PerformRequest(
            id: performId, call: call, modes: modes, afterDelay: spec.afterDelay, completion: completion)
        if spec.afterDelay > 0 {
            delayed.append(request)
            request.fireAt = Date(timeIntervalSinceNow: spec.afterDelay)
            let timer = CFRunLoopTimerCreateWithHandler(
                kCFAllocatorDefault, CFAbsoluteTimeGetCurrent() + spec.afterDelay, 0, 0, 0
            ) { [weak self, request] _ in
                self?.delayedFired(request)
            }
            request.timer = timer
            cond.unlock()
            if let loop = runLoop {
                for mode in modes { CFRunLoopAddTimer(loop, timer, mode.cfMode) }
            }
        } else {
            pending.append(request)
            cond.unlock()
            post(request)
        }
        touch()
        if let timeout, completion != nil {
            let emit = self.emit
            let deadline = Deadlines.after(timeout) { [id] in
                let result = PerformResult(
                    performId: performId, thread: id, selector: call.selector,
                    outcome: .failure(
                        RunLoopError(
                            kind: .deadline, code: "deadline_exceeded",
                            message:
                                "perform \(performId) did not finish within \(timeout) s; it stays pending and runs when thread \(id)'s loop next runs in one of its modes"
                        )), queuedMs: 0, ranMs: 0)
                // The caller is told; the perform itself stays queued.
                request.reply(result) { emit(.perform(thread: id, result: result)) }
            }
            request.setDeadline(deadline)
        }
        return performId
    }

    /// A delayed perform's timer fired (on this thread): run it now.
    private func delayedFired(_ request: PerformRequest) {
        cond.lock()
        guard request.stage == .delayed else {
            cond.unlock()
            return
        }
        delayed.removeAll { $0 === request }
        request.stage = .pending
        // The timer's block holds the request: break the cycle (CF keeps the
        // timer alive for the rest of this callout).
        request.timer = nil
        pending.append(request)
        cond.unlock()
        execute(request)
    }

    /// Posts a pending perform into the command source of each of its modes
    /// (adding the source to the mode while it has work): signal + wake-up.
    private func post(_ request: PerformRequest) {
        guard let runLoop else { return }  // ended: teardown answered the request
        for mode in request.modes {
            memberLock.lock()
            var entry = performSources[mode.name] ?? (makePerformSource(mode: mode.name), false)
            let mustFire = entry.source.enqueueClaimingWakeUp(request).mustFire
            let needsAdd = !entry.inLoop
            entry.inLoop = true
            performSources[mode.name] = entry
            if needsAdd { entry.source.add(to: runLoop, mode: mode) }
            memberLock.unlock()
            // A burst of performs into a busy thread costs one wake-up.
            if mustFire { entry.source.fire(on: runLoop) }
        }
    }

    private func makePerformSource(mode: String) -> CommandSource<PerformRequest> {
        CommandSource<PerformRequest>(coalescingWakeUps: true) { [weak self] batch in
            self?.performBatch(batch, mode: mode)
        }
    }

    /// The perform routine of a mode's command source: runs the batch in order.
    private func performBatch(_ batch: [PerformRequest], mode: String) {
        for request in batch { execute(request) }
        retireEmptySources([mode])
    }

    /// Takes each named mode's command source out of its mode once nothing is
    /// left in it, so a loop with nothing else in the mode still finishes (CF's
    /// own rule for performs: the source is removed once the call ran).
    private func retireEmptySources(_ names: [String]) {
        guard let runLoop else { return }
        memberLock.lock()
        defer { memberLock.unlock() }
        for name in names {
            guard let entry = performSources[name], entry.inLoop, entry.source.pendingCount == 0,
                let mode = try? RunLoopMode(name)
            else { continue }
            entry.source.remove(from: runLoop, mode: mode)
            performSources[name] = (entry.source, false)
        }
    }

    /// Runs one perform on this thread unless another mode's source already did;
    /// withdraws it from the other modes' sources.
    private func execute(_ request: PerformRequest) {
        cond.lock()
        guard request.stage == .pending else {
            cond.unlock()
            return
        }
        request.stage = .running
        pending.removeAll { $0 === request }
        cond.unlock()
        if request.modes.count > 1 {
            memberLock.lock()
            for mode in request.modes { performSources[mode.name]?.source.withdraw { $0 === request } }
            memberLock.unlock()
            retireEmptySources(request.modes.map(\.name))
        }
        let started = Monotonic.now()
        let queuedMs = (started - request.queuedMono) * 1000 - request.afterDelay * 1000
        let outcome = runSelector(request.call)
        let ranMs = (Monotonic.now() - started) * 1000
        cond.lock()
        request.stage = .done
        cond.unlock()
        answer(request, outcome.map(\.value), queuedMs: max(0, queuedMs), ranMs: ranMs)
    }

    private func answer(
        _ request: PerformRequest, _ outcome: Result<Value, RunLoopError>, queuedMs: Double, ranMs: Double
    ) {
        let result = PerformResult(
            performId: request.id, thread: id, selector: request.call.selector, outcome: outcome, queuedMs: queuedMs,
            ranMs: ranMs)
        // The event (and so the metrics) first: a caller who sees the answer
        // can count on them.
        emit(.perform(thread: id, result: result))
        request.reply(result)
    }

    /// Cancels delayed performs of `selector` whose timers have not fired
    /// (`cancelPreviousPerformRequests`); returns how many.
    public func cancelDelayedPerforms(selector: String) -> Int {
        cond.lock()
        let matching = delayed.filter { $0.call.selector == selector }
        delayed.removeAll { $0.call.selector == selector }
        let timers = matching.compactMap(\.timer)
        for request in matching {
            request.stage = .done
            request.timer = nil
        }
        cond.unlock()
        for timer in timers { CFRunLoopTimerInvalidate(timer) }
        for request in matching {
            answer(
                request,
                .failure(.conflict("cancelled", "perform \(request.id) was cancelled before its delay passed")),
                queuedMs: 0, ranMs: 0)
        }
        return matching.count
    }

    /// Performs queued and not yet run, oldest first.
    public func pendingPerforms() -> [PerformSnapshot] {
        cond.lock()
        defer { cond.unlock() }
        return (delayed + pending).map(\.snapshot).sorted { $0.queuedAt < $1.queuedAt }
    }

    // MARK: - Idle task queue

    /// Adds a task; the loop runs one task per turn, before it waits. A loop
    /// asleep in a run is woken so it reaches its next idle moment now.
    public func addTask(id taskId: String, call: SelectorCall) throws(RunLoopError) -> TaskQueueSnapshot {
        guard !taskId.isEmpty, taskId.utf8.count <= 64 else { throw .badValue("id", "a task id is 1-64 bytes") }
        let checked = try selectors.validate(call)
        cond.lock()
        let snap: TaskQueueSnapshot
        do throws(RunLoopError) {
            try checkAliveLocked()
            try taskQueue.add(id: taskId, call: checked)
            snap = taskQueue.snapshot()
        } catch {
            cond.unlock()
            throw error
        }
        cond.unlock()
        // Emitted before the wake-up, so "added" always precedes "started".
        emit(.task(thread: id, task: taskId, change: "added", runs: 0))
        if let loop = runLoop { CFRunLoopWakeUp(loop) }
        return snap
    }

    /// Removes one task (refused while it runs).
    public func removeTask(id taskId: String) throws(RunLoopError) -> TaskQueueSnapshot {
        cond.lock()
        let snap: TaskQueueSnapshot
        do throws(RunLoopError) {
            try taskQueue.remove(id: taskId)
            snap = taskQueue.snapshot()
        } catch {
            cond.unlock()
            throw error
        }
        cond.unlock()
        emit(.task(thread: id, task: taskId, change: "removed", runs: 0))
        return snap
    }

    /// Removes every task (refused while one runs); returns how many.
    public func removeAllTasks() throws(RunLoopError) -> Int {
        cond.lock()
        defer { cond.unlock() }
        return try taskQueue.removeAll()
    }

    /// Suspends (true) or resumes (false) the queue; a running task finishes.
    public func setTasksSuspended(_ suspended: Bool) throws(RunLoopError) -> TaskQueueSnapshot {
        cond.lock()
        // `defer`, not a bare unlock: a throw here (the thread has exited or is
        // ending) once left `cond` held, wedging every later caller.
        let snap: TaskQueueSnapshot
        do {
            defer { cond.unlock() }
            try checkAliveLocked()
            taskQueue.suspended = suspended
            snap = taskQueue.snapshot()
        }
        if !suspended, let loop = runLoop { CFRunLoopWakeUp(loop) }
        return snap
    }

    /// The queue, suspended flag and done count.
    public func taskSnapshot() -> TaskQueueSnapshot {
        cond.lock()
        defer { cond.unlock() }
        return taskQueue.snapshot()
    }

    /// Runs a selector now through a source0 + wake-up instead of at idle time.
    @discardableResult
    public func executeTask(
        _ call: SelectorCall, timeout: Double? = nil, completion: (@Sendable (PerformResult) -> Void)? = nil
    ) throws(RunLoopError) -> String {
        try perform(PerformSpec(call: call, modes: [.common]), timeout: timeout, completion: completion)
    }

    /// The `beforeWaiting` observer: runs ONE task, then wakes the loop if more
    /// remain so the next turn runs the next one.
    private func runOneTask() {
        cond.lock()
        guard !taskQueue.suspended, taskQueue.running == nil, let first = taskQueue.entries.first else {
            cond.unlock()
            return
        }
        taskQueue.running = first.id
        cond.unlock()
        emit(.task(thread: id, task: first.id, change: "started", runs: first.runs))
        let outcome = runSelector(first.call)
        cond.lock()
        taskQueue.running = nil
        var runsSoFar = first.runs + 1
        var change: String
        if let index = taskQueue.entries.firstIndex(where: { $0.id == first.id }) {
            taskQueue.entries[index].runs += 1
            runsSoFar = taskQueue.entries[index].runs
            switch outcome {
            case .success(let result) where result.finished:
                taskQueue.entries.remove(at: index)
                taskQueue.done += 1
                change = "finished"
            case .success:
                change = "ran"
            case .failure:
                taskQueue.entries.remove(at: index)
                taskQueue.failed += 1
                change = "failed"
            }
        } else {
            change = "ran"
        }
        let more = !taskQueue.suspended && !taskQueue.entries.isEmpty
        cond.unlock()
        emit(.task(thread: id, task: first.id, change: change, runs: runsSoFar))
        if more, let loop = CFRunLoopGetCurrent() { CFRunLoopWakeUp(loop) }
    }

    // MARK: - Nested runs

    /// Runs the loop recursively from inside a handler (only on this worker's
    /// thread); returns that run's own exit.
    public func runNested(mode: RunLoopMode, seconds: Double, returnAfterSourceHandled: Bool) throws(RunLoopError)
        -> RunExit
    {
        guard pthread_equal(pthread_self(), thread) != 0 else {
            throw .conflict("wrong_thread", "a nested run can only start on the worker's own thread")
        }
        guard !mode.isCommon else {
            throw .badValue("args.mode", "a loop runs in one mode; common is a set of modes")
        }
        try limits.checkSeconds(seconds, field: "args.seconds")
        return runOnce(mode: mode, seconds: seconds, returnAfterSourceHandled)
    }
}

/// A value set once from another thread.
final class ResultBox<T: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: T?
    func set(_ newValue: T) {
        lock.lock()
        value = newValue
        lock.unlock()
    }
    func get() -> T? {
        lock.lock()
        defer { lock.unlock() }
        return value
    }
    /// Changes the value in place, under the lock.
    func update(_ change: (inout T?) -> Void) {
        lock.lock()
        change(&value)
        lock.unlock()
    }
}
