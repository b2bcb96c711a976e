import CoreFoundation
import Foundation

/// Performs (`performSelector:onThread:withObject:waitUntilDone:modes:` and
/// `afterDelay:`): queued from any thread, run on the worker's thread by the
/// per-mode carriers of its `PerformQueue`.
extension Worker {
    /// Runs a validated selector call on the current thread (the worker's own).
    func runSelector(_ call: SelectorCall, message: PortMessage? = nil) -> Result<SelectorOutcome, RunLoopError> {
        guard let selector = selectors.selector(named: call.selector) else {
            return .failure(.notFound("selector", call.selector))
        }
        let context = SelectorContext(worker: self, registry: registry, args: call.args, message: message)
        do throws(RunLoopError) {
            return .success(try selector.body(context))
        } catch {
            return .failure(error)
        }
    }

    /// Validates and runs `call` now, on this worker's own thread (a perform
    /// with waitUntilDone on the current thread runs at once, as in Cocoa).
    func runSelectorNow(_ call: SelectorCall) throws(RunLoopError) -> Value {
        let checked = try selectors.validate(call)
        switch runSelector(checked) {
        case .success(let outcome): return outcome.value
        case .failure(let error): throw error
        }
    }

    /// Queues a selector on this worker's loop (`performSelector:onThread:`).
    ///
    /// The call runs on the worker's thread, in order with other performs for
    /// the same modes, only while the loop runs in one of `spec.modes`; until
    /// then it is pending (listed on the worker). `completion` (if any) gets the
    /// first answer: the result, or, with a `deadline`, the caller's error once
    /// the time passes (the perform then stays pending, exactly as CF would
    /// leave it). Returns the perform's id.
    @discardableResult
    public func perform(
        _ spec: PerformSpec, deadline: CallerDeadline? = nil,
        completion: (@Sendable (PerformResult) -> Void)? = nil
    ) throws(RunLoopError) -> String {
        let call = try selectors.validate(spec.call)
        guard !spec.modes.isEmpty else { throw .badValue("modes", "name at least one mode") }
        if let afterDelay = spec.afterDelay { try limits.checkSeconds(afterDelay, field: "afterDelay") }
        if let deadline { try limits.checkSeconds(deadline.seconds, field: "timeout") }
        var seen = Set<String>()
        let modes = spec.modes.filter { seen.insert($0.name).inserted }
        if spec.via == .block {
            guard spec.afterDelay == nil else {
                throw .badValue(
                    "afterDelay",
                    "a block perform has no delay (CFRunLoopPerformBlock): drop afterDelay or use via selector")
            }
            let request = PerformRequest(
                id: ids.next("p"), call: call, modes: modes, afterDelay: nil, viaBlock: true, completion: completion)
            try performBlock(request)
            if let deadline, completion != nil { expire(request, after: deadline) }
            return request.id
        }
        let request = PerformRequest(
            id: ids.next("p"), call: call, modes: modes, afterDelay: spec.afterDelay, completion: completion)
        // Cocoa's afterDelay: a one-shot timer, even for 0 (a timer never makes
        // a run return handledSource); otherwise the per-mode custom source.
        let delayTimer: CFRunLoopTimer? = spec.afterDelay.map { delay in
            CFRunLoopTimerCreateWithHandler(kCFAllocatorDefault, CFAbsoluteTimeGetCurrent() + delay, 0, 0, 0) {
                [weak self, request] _ in
                self?.delayedFired(request)
            }
        }
        let queued = try enqueue(request, delayTimer: delayTimer)
        announce(request, queued, delayTimer: delayTimer)
        if let deadline, completion != nil { expire(request, after: deadline) }
        return request.id
    }

    /// What queueing a perform left to do after the book's lock.
    private struct Enqueued {
        var loop: CFRunLoop?
        var toSignal: [CFRunLoopSource] = []
        var change: PerformQueue.Change?
        var placement = PerformPlacement.idle
    }

    /// Puts `request` in the book: its delay timer, or the pending queue of
    /// each of its modes. A mode's first perform needs a carrier, a CF source:
    /// it is made after the lock (and the perform queued on a second pass);
    /// carriers made but not used (another perform made one first) are dropped
    /// after it.
    private func enqueue(_ request: PerformRequest, delayTimer: CFRunLoopTimer?) throws(RunLoopError) -> Enqueued {
        let routine: @Sendable (String) -> Void = { [weak self] mode in self?.performRoutine(mode: mode) }
        var made: [String: PerformCarrier] = [:]
        var queued = Enqueued()
        while true {
            let missing: [RunLoopMode] = try book.withLock { b throws(RunLoopError) in
                try place(request, delayTimer: delayTimer, in: &b, made: &made, queued: &queued)
            }
            if missing.isEmpty { break }
            for mode in missing { made[mode.name] = PerformCarrier { routine(mode.name) } }
        }
        made.removeAll()  // unused carriers, released after the lock
        return queued
    }

    /// One pass of `enqueue` under the book's lock; returns the modes that
    /// still need a carrier.
    /// A perform (selector or block) may be queued: the thread is alive and
    /// its queue below `--max-queued-commands`. Under the book's lock.
    func admitPerform(in b: WorkerBook) throws(RunLoopError) {
        try b.checkAlive(id)
        guard b.performs.count < limits.maxQueuedCommands else {
            throw .limit(
                .queueFull,
                "thread \(id) already has \(b.performs.count) queued performs (limit \(limits.maxQueuedCommands))")
        }
    }

    private func place(
        _ request: PerformRequest, delayTimer: CFRunLoopTimer?, in b: inout WorkerBook,
        made: inout [String: PerformCarrier], queued: inout Enqueued
    ) throws(RunLoopError) -> [RunLoopMode] {
        try admitPerform(in: b)
        for mode in request.modes { b.filled(mode.name) }
        queued.placement = b.placement(of: request.modes)
        queued.loop = b.loop
        if let delayTimer {
            b.performs.addDelayed(request, timer: delayTimer)
            return []
        }
        guard b.loop != nil else { return [] }
        switch b.performs.enqueue(request, made: &made) {
        case .needsCarriers(let missing):
            return missing
        case .queued(let signal, let settled, let first):
            (queued.toSignal, queued.change) = (signal, first)
            // Every carrier is in its mode: a parked worker may run now.
            // (Otherwise the applier touches once it added them.)
            if settled { b.touch() }
            return []
        }
    }

    /// After the lock: the delay timer added, the carriers signalled and the
    /// loop woken, the explainer told.
    private func announce(_ request: PerformRequest, _ queued: Enqueued, delayTimer: CFRunLoopTimer?) {
        if let delayTimer {
            if let loop = queued.loop {
                for mode in request.modes { CFRunLoopAddTimer(loop, delayTimer, mode.cfMode) }
            }
            noteTimerAdded(to: request.modes.map(\.name))
            touch()
        } else {
            book.notifyAll()
        }
        if let loop = queued.loop {
            for source in queued.toSignal { CFRunLoopSourceSignal(source) }
            if !queued.toSignal.isEmpty { CFRunLoopWakeUp(loop) }
        }
        if let change = queued.change { applyCarrierChanges(from: change, on: queued.loop, loopThread: false) }
        for mode in request.modes { noteMode(mode) }
        unwarn(.emptyModeAsleep)
        if queued.placement != .runningInMode { watchPerform(request, idle: queued.placement == .idle) }
    }

    /// The caller's deadline: told (and the event recorded) only if nothing
    /// answered first; the perform itself stays queued.
    func expire(_ request: PerformRequest, after deadline: CallerDeadline) {
        let emit = self.emit
        // The answer is made only if the deadline passes: most are cancelled.
        request.reply.expire(after: deadline.seconds, first: { [id] in emit(.perform(thread: id, result: $0)) }) {
            [id, performId = request.id, selector = request.call.selector] in
            PerformResult(
                performId: performId, thread: id, selector: selector,
                outcome: .failure(deadline.error(performId)), queuedMs: 0, ranMs: 0)
        }
    }

    /// A delayed perform's timer fired (on this thread): run it now, unless it
    /// was cancelled.
    private func delayedFired(_ request: PerformRequest) {
        let taken = book.withLock { b in
            guard b.performs.takeDelayed(request) else { return false }
            for mode in request.modes {
                b.removed(
                    "perform", request.id, how: "fired after its delay (its one-shot timer left the mode)",
                    from: mode.name)
            }
            return true
        }
        guard taken else { return }
        execute(request, throughTimer: true)
    }

    /// The perform routine of one mode's carrier: runs, in order, the performs
    /// for the mode queued before it began; then takes the carrier out of the
    /// mode if nothing is left for it.
    private func performRoutine(mode: String) {
        let bound = book.withLock { $0.performs.beginRoutine(mode: mode) }
        var last: String?
        while let request = book.withLock({ $0.performs.takeNext(in: mode, upTo: bound) }) {
            if request.modes.count > 1 {
                // Its other modes' carriers may have nothing left to carry.
                let (change, loop) = book.withLock { b in
                    (b.performs.retire(request.modes.map(\.name).filter { $0 != mode }).change, b.loop)
                }
                if let change { applyCarrierChanges(from: change, on: loop, loopThread: true) }
            }
            execute(request)
            last = request.id
        }
        let (change, loop) = book.withLock { b in
            let (retired, change) = b.performs.retire([mode])
            // Recorded when decided, before CF removes the carrier: a run that
            // finds the mode empty already knows what emptied it.
            for name in retired {
                b.removed(
                    "perform", last ?? "-", how: "ran, and its mode's perform source left the mode", from: name)
            }
            return (change, b.loop)
        }
        if let change { applyCarrierChanges(from: change, on: loop, loopThread: true) }
    }

    /// The applier's work (see `PerformQueue`): makes `first`, then every
    /// change decided meanwhile, one at a time, each recorded under the lock
    /// before the next is taken; the CF calls happen between the locks. After
    /// an add, a parked worker may run (touch) and the carrier is signalled
    /// and the loop woken; after a remove made off the loop's thread, the loop
    /// is woken to notice an emptied mode (on its own thread, inside the
    /// perform routine, the turn under way notices it).
    private func applyCarrierChanges(from first: PerformQueue.Change, on loop: CFRunLoop?, loopThread: Bool) {
        var change = first
        while true {
            if let loop {
                if change.add {
                    CFRunLoopAddSource(loop, change.carrier.source, change.mode.cfMode)
                } else {
                    CFRunLoopRemoveSource(loop, change.carrier.source, change.mode.cfMode)
                }
            }
            let done = change
            let (signal, next) = book.withLock { b in
                if done.add { b.touch() }
                return b.performs.applied(done)
            }
            if let loop {
                if done.add {
                    book.notifyAll()
                } else if !loopThread {
                    CFRunLoopWakeUp(loop)
                }
                if let signal {
                    CFRunLoopSourceSignal(signal)
                    CFRunLoopWakeUp(loop)
                }
            }
            guard let next else { return }
            change = next
        }
    }

    /// Runs one taken perform on this thread and answers it.
    func execute(_ request: PerformRequest, throughTimer: Bool = false) {
        var ref = CalloutRef(kind: .perform, id: request.id, selector: request.call.selector)
        ref.throughTimer = throughTimer
        ref.viaBlock = request.viaBlock
        book.withLock { $0.runningPerform = (request.id, request.call.selector) }
        let (outcome, queuedMs, ranMs) = callout(ref) {
            let started = Monotonic.now()
            let queuedMs = max(0, (started - request.queuedMono) * 1000 - request.afterDelay * 1000)
            tracer.pending.performLag.add(queuedMs)
            let outcome = runSelector(request.call)
            return (outcome, queuedMs, (Monotonic.now() - started) * 1000)
        }
        answer(request, outcome.map(\.value), queuedMs: queuedMs, ranMs: ranMs)
    }

    /// The warnings a queued perform can cause: pending on a loop that is not
    /// running, or waiting in modes the thread does not run.
    func watchPerform(_ request: PerformRequest, idle: Bool) {
        let pending: @Sendable (Worker) -> Bool = { worker in
            worker.book.withLock { b in b.performs.queued.contains { $0 === request } }
        }
        if idle && !request.viaTimer {
            later(diagnostics.options.idlePerformAfter) { worker in
                guard pending(worker), worker.book.withLock({ $0.runStack.isEmpty }) else { return }
                let style = worker.policy.style
                worker.warn(
                    .performOnIdleLoop, severity: "info", subjects: [request.id],
                    message:
                        "perform \(request.id) (\(request.call.selector)) waits: \(worker.id) is not running its loop"
                        + (style == .manual ? " (a manual thread runs only when asked: POST its run)" : ""),
                    details: ["selector": .string(request.call.selector)])
            }
        } else if !idle {
            watchModes(request.modes.map(\.name), item: request.id, kind: "perform", stillWaiting: pending)
        }
    }

    /// Records the perform event, then answers the caller (if a deadline did not
    /// answer first). The event comes first: a caller who sees the answer can
    /// count on it (and on the metrics built from it).
    func answer(_ request: PerformRequest, _ outcome: Result<Value, RunLoopError>, queuedMs: Double, ranMs: Double) {
        let result = PerformResult(
            performId: request.id, thread: id, selector: request.call.selector, outcome: outcome, queuedMs: queuedMs,
            ranMs: ranMs)
        let state: PerformState
        switch outcome {
        case .success: state = .done
        case .failure(let error): state = error.code == "cancelled" ? .cancelled : .failed
        }
        book.withLock { b in
            if b.runningPerform?.id == request.id { b.runningPerform = nil }
            b.answeredPerforms.append(
                PerformStatus(
                    id: request.id, selector: request.call.selector, state: state, outcome: outcome,
                    queuedMs: queuedMs, ranMs: ranMs, finishedAt: Date()))
        }
        emit(.perform(thread: id, result: result))
        request.reply.answer(result)
        unwarn(.performOnIdleLoop, subject: request.id)
        unwarn(.modeNeverRuns, subject: request.id)
    }

    /// Cancels delayed performs of `selector` whose timers have not fired
    /// (`cancelPreviousPerformRequestsWithTarget:selector:object:`): with
    /// `args`, only those called with equal arguments (defaults filled in
    /// before comparing, as they were when queued). Returns their ids.
    public func cancelDelayedPerforms(selector: String, args: [String: Value]? = nil) -> [String] {
        var match = args
        if let args, let checked = try? selectors.validate(SelectorCall(selector: selector, args: args)) {
            // Defaults filled in, as they were when queued; arguments the selector
            // would refuse match nothing queued, so they are compared as given.
            match = checked.args
        }
        let cancelled = book.withLock { [match] b in
            let cancelled = b.performs.cancelDelayed(selector: selector, args: match)
            // Its one-shot timer leaves its modes: what may empty them.
            for entry in cancelled {
                for mode in entry.request.modes {
                    b.removed(
                        "perform", entry.request.id, how: "was cancelled before its delay passed", from: mode.name)
                }
            }
            return cancelled
        }
        for entry in cancelled {
            if let date = Self.fireDate(entry.timer) {
                noteTimersLeaving([(entry.request.id, date)], from: entry.request.modes.map(\.name))
            }
            CFRunLoopTimerInvalidate(entry.timer)
        }
        for entry in cancelled {
            answer(
                entry.request,
                .failure(.conflict(.cancelled, "perform \(entry.request.id) was cancelled before its delay passed")),
                queuedMs: 0, ranMs: 0)
        }
        return cancelled.map(\.request.id)
    }

    /// Where perform `performId` is: delayed, pending, running, or its answer
    /// (the last `Limits.performHistory` answered performs are remembered).
    public func performStatus(_ performId: String) throws(RunLoopError) -> PerformStatus {
        let status: PerformStatus? = book.withLock { b in
            if let request = b.performs.queued.first(where: { $0.id == performId }) {
                let delayed = b.performs.isDelayed(performId)
                return PerformStatus(
                    id: performId, selector: request.call.selector, state: delayed ? .delayed : .pending,
                    fireAt: delayed ? request.fireAt : nil)
            }
            if let running = b.runningPerform, running.id == performId {
                return PerformStatus(id: performId, selector: running.selector, state: .running)
            }
            return b.answeredPerforms.elements.last { $0.id == performId }
        }
        guard let status else { throw .notFound("perform", performId) }
        return status
    }

    /// Performs queued and not yet run, oldest first.
    public func pendingPerforms() -> [PerformSnapshot] {
        book.withLock { $0.performs.queued }.map(\.snapshot).sorted { $0.queuedAt < $1.queuedAt }
    }
}
