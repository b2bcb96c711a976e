import CLinux
import CoreFoundation
import Foundation

/// Runs: the three run styles (loop thread), one recorded `CFRunLoopRunInMode`,
/// nested runs, and the calls that start or stop a run from any thread.
extension Worker {
    func runLoopStyle() {
        while true {
            guard let seen = book.withLock({ $0.cancelled ? nil : $0.generation }) else { return }
            let exit = runOnce(mode: policy.mode, seconds: policy.seconds, policy.returnAfterSourceHandled)
            guard exit.reason == .finished else { continue }
            // CF answers `finished` at once, every time, for an empty mode: park
            // instead of spinning, until something is added or the worker ends.
            let park = book.withLock { b in
                guard !b.cancelled && b.generation == seen else { return false }
                b.parked = true
                return true
            }
            guard park else { continue }
            emit(.thread(snapshot, change: .parked))
            book.withLock(when: { $0.cancelled || $0.generation != seen }) { $0.parked = false }
            emit(.thread(snapshot, change: .unparked))
        }
    }

    func runForeverStyle() {
        // Exactly what CFRunLoopRun() does (a loop of default-mode runs until one
        // is stopped or finished), spelled out so every inner result is recorded.
        while true {
            let exit = runOnce(mode: .default, seconds: 1.0e10, false)
            if exit.reason == .stopped || exit.reason == .finished { return }
            if book.withLock({ $0.cancelled }) { return }
        }
    }

    /// `-[NSRunLoop run]` and `runUntilDate:`: passes of
    /// `runMode:default beforeDate:` (returnAfterSourceHandled, as Foundation
    /// calls it) until the mode is empty or the date passes. A stop ends only
    /// the pass it lands in. As swift-corelibs-foundation's
    /// `RunLoop.run(mode:before:)` does, each pass first asks
    /// `_CFRunLoopFinished` and does not enter CF for an empty mode: no run is
    /// recorded and no observer hears an entry for it.
    func runCocoaStyle(until: Double?) {
        while !book.withLock({ $0.cancelled }) {
            var seconds = RunPolicy.distantFuture
            if let until {
                seconds = until - Monotonic.now()
                if seconds <= 0 { return }
            }
            if let loop = CFRunLoopGetCurrent(), _CFRunLoopFinished(loop, RunLoopMode.default.cfMode) { return }
            if runOnce(mode: .default, seconds: seconds, true).reason == .finished { return }
        }
    }

    private enum ManualStep {
        case run(ManualRun)
        case end(leftover: ManualRun?)
    }

    func runManualStyle() {
        while true {
            let step: ManualStep = book.withLock(when: {
                $0.cancelled || ($0.manualRequest != nil && $0.runStack.isEmpty)
            }) { b in
                if b.cancelled || b.manualRequest == nil {
                    defer { b.manualRequest = nil }
                    return .end(leftover: b.manualRequest)
                }
                return .run(b.manualRequest!)
            }
            switch step {
            case .end(let leftover):
                leftover?.reply(.failure(Worker.endedError(id)))
                return
            case .run(let request):
                let exit = runOnce(mode: request.mode, seconds: request.seconds, request.returnAfterSourceHandled)
                book.withLock { $0.manualRequest = nil }
                request.reply(.success(exit))
            }
        }
    }

    /// One `CFRunLoopRunInMode` call on this thread, recorded. Nested calls (from
    /// a selector) are recorded too, each with its own exit reason.
    func runOnce(mode: RunLoopMode, seconds: Double, _ returnAfterSourceHandled: Bool) -> RunExit {
        let started = Monotonic.now()
        // Only the keep-alive port holds the mode open (an empty mode just
        // finishes; a keep-alive timer does wake it, once a day). runloopd's
        // own loop style is woken by every request, so it is not warned about.
        let mayWarn = policy.style != .loop && seconds >= diagnostics.options.cannotWakeSeconds && keepAlive == .port
        let here = UInt(clinux_stack_here())
        let (seq, depth, observers, contents, parked) = book.withLock { b in
            // A manual thread's outermost run takes the checks parked while it was idle.
            let parked = b.runStack.isEmpty ? b.parkedModeChecks : []
            if b.runStack.isEmpty { b.parkedModeChecks = [] }
            if b.stackHigh > here { b.stackUsedMax = max(b.stackUsedMax, Int(b.stackHigh - here)) }
            b.depthMax = max(b.depthMax, b.runStack.count + 1)
            b.runSeq += 1
            b.runStack.append(
                RunFrame(
                    seq: b.runSeq, mode: mode.name, seconds: seconds, startedMono: started,
                    returnAfterSourceHandled: returnAfterSourceHandled))
            b.modeEntered[mode.name] = started
            b.turnSince = started
            b.asleepSince = nil
            let newMode = b.entryObserverModes.insert(mode.name).inserted
            let observers = newMode ? [b.entryObserver, b.sleepObserver].compactMap { $0 } : []
            return (b.runSeq, b.runStack.count - 1, observers, mayWarn ? b.contents : nil, parked)
        }
        for check in parked { later(diagnostics.options.modeNeverRunsAfter, check) }
        // Asked of the records after the lock (CF validity, their modes' own lock).
        let cannotWake =
            contents.map { $0.holdsKeepAlivePort(in: mode.name) && !$0.hasWakeableItems(in: mode.name) } ?? false
        if !observers.isEmpty, let loop = CFRunLoopGetCurrent() {
            for observer in observers { CFRunLoopAddObserver(loop, observer, mode.cfMode) }
        }
        runBegins(seq: seq, mode: mode.name, depth: depth, at: started, cannotWake: cannotWake)
        noteMode(mode)

        let raw = CFRunLoopRunInMode(mode.cfMode, seconds, returnAfterSourceHandled)
        let ended = Monotonic.now()
        let duration = ended - started
        // CF returns one of the four documented results; anything else would be a
        // CF bug, reported as `finished` only because the run did return.
        let reason = ExitReason(raw) ?? .finished
        let summary = runEnds(reason: reason, at: ended)
        var exit = RunExit(
            reason: reason, mode: mode.name, duration: duration, endedAt: Date(), run: seq, depth: depth)

        let (waiting, stopOuter, remaining, wasLivelocked) = book.withLock { b in
            let frame = b.runStack.removeLast()
            if b.runStack.isEmpty { b.idleSinceMono = Monotonic.now() }
            exit.cause = b.cause(
                of: reason, frame: frame, summary: summary, cancelled: b.cancelled, since: started)
            b.runs += 1
            b.exits[reason, default: 0] += 1
            b.lastExit = exit
            b.recentExits.append(exit)
            // A stale timerfd in this mode that expired during the run was read by it.
            if let stale = b.timerfdStale[mode.name], stale <= CFAbsoluteTimeGetCurrent() {
                b.timerfdStale[mode.name] = nil
            }
            b.turnSince = nil
            b.asleepSince = nil
            let waiting = b.stopWaiters.filter { $0.seq == seq }.map(\.reply)
            b.stopWaiters.removeAll { $0.seq == seq }
            // An ending thread unwinds every run; a livelocked one its nest
            // (down to the outermost run, which goes on).
            let stopOuter = b.cancelled ? !b.runStack.isEmpty : (b.livelocked && b.runStack.count > 1)
            let wasLivelocked = b.livelocked
            if b.runStack.count <= 1 { b.nestCPUStart = nil }
            if b.runStack.isEmpty { b.livelocked = false }
            return (waiting, stopOuter, b.runStack.count, wasLivelocked)
        }
        book.notifyAll()
        if let turn = summary.turn { publish(turn, at: ended) }
        if cannotWake { unwarn(.loopCannotWake, subject: mode.name) }
        unwarn(.emptyModeAsleep, subject: mode.name)
        for reply in waiting { reply(.success(exit)) }
        if wasLivelocked || remaining <= 1 { runFinishedInBudget(remaining: remaining, wasLivelocked: wasLivelocked) }
        emit(.runExit(thread: id, exit: exit))
        if stopOuter, let loop = CFRunLoopGetCurrent() { CFRunLoopStop(loop) }
        return exit
    }

    /// The `entry` observer: the innermost run now has its stop flag; apply a
    /// stop that arrived before it did.
    func runEntered() {
        let stopNow = book.withLock { b -> Bool in
            guard !b.runStack.isEmpty else { return false }
            b.runStack[b.runStack.count - 1].entered = true
            return b.runStack[b.runStack.count - 1].stopRequested
        }
        if stopNow, let loop = CFRunLoopGetCurrent() { CFRunLoopStop(loop) }
    }

    // MARK: - Starting and stopping runs (any thread)

    /// `CFRunLoopStop`: `reply` gets the exit of the run it ended, when that run
    /// returns. With no run under way CF keeps no flag and the stop would do
    /// nothing, so the reply is a `not_running` conflict at once.
    ///
    /// A run runloopd has decided to start but CF has not yet entered (its
    /// `entry` observer has not fired) has no stop flag either: CF's
    /// `CFRunLoopRunSpecific` gives every run a fresh per-run record, so a
    /// stop that came before is dropped and the run goes on. That is the
    /// default (`stop_dropped`, a conflict at once); `atEntry` keeps the
    /// stop and applies it when CF enters the run (runloopd's kindness).
    public func stop(
        origin: StopOrigin? = nil, atEntry: Bool = false,
        reply: @escaping @Sendable (Result<RunExit, RunLoopError>) -> Void
    ) {
        enum Step {
            case refuse(RunLoopError)
            case stopNow(CFRunLoop?)
            case atEntry
        }
        let step: Step = book.withLock { b in
            if b.exited { return .refuse(Worker.exitedError(id)) }
            guard let innermost = b.runStack.last else {
                return .refuse(
                    .conflict(
                        .notRunning,
                        "thread \(id) is not inside a run; CFRunLoopStop would do nothing (CF keeps no stop flag)"))
            }
            guard innermost.entered || atEntry else {
                return .refuse(
                    .conflict(
                        .stopDropped,
                        "thread \(id) is about to start run \(innermost.seq) but CF has not entered it yet: CF gives each run a fresh stop flag, so CFRunLoopStop now would be dropped and the run would go on; stop again once it runs, or ask with atEntry: true to have runloopd apply the stop at entry"
                    ))
            }
            b.stopWaiters.append((innermost.seq, reply))
            if b.runStack[b.runStack.count - 1].stopOrigin == nil {
                b.runStack[b.runStack.count - 1].stopOrigin = origin ?? .request(by: "Worker.stop", requestId: nil)
            }
            guard innermost.entered else {
                // CF has not started this run yet: its entry observer stops it.
                b.runStack[b.runStack.count - 1].stopRequested = true
                return .atEntry
            }
            return .stopNow(b.loop)
        }
        switch step {
        case .refuse(let error): reply(.failure(error))
        case .stopNow(let loop): if let loop { CFRunLoopStop(loop) }
        case .atEntry: break
        }
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
        try book.withLock { b throws(RunLoopError) in
            try b.checkAlive(id)
            guard policy.style == .manual else {
                throw .conflict(
                    .notManual,
                    "thread \(id) runs its loop itself (style \(policy.style.rawValue)); only manual threads run on request"
                )
            }
            guard b.manualRequest == nil else {
                throw .conflict(.alreadyRunning, "thread \(id) is already running a requested run")
            }
            b.manualRequest = ManualRun(
                mode: mode, seconds: seconds, returnAfterSourceHandled: returnAfterSourceHandled, reply: reply)
        }
        book.notifyAll()
    }

    // MARK: - Nested runs

    /// Runs the loop recursively from inside a handler (only on this worker's
    /// thread); returns that run's own exit.
    public func runNested(mode: RunLoopMode, seconds: Double, returnAfterSourceHandled: Bool) throws(RunLoopError)
        -> RunExit
    {
        let own = book.withLock { $0.thread }
        guard let own, pthread_equal(pthread_self(), own) != 0 else {
            throw .conflict(.wrongThread, "a nested run can only start on the worker's own thread")
        }
        guard !mode.isCommon else {
            throw .badValue("args.mode", "a loop runs in one mode; common is a set of modes")
        }
        try limits.checkSeconds(seconds, field: "args.seconds")
        // Depth, stack and CPU budgets, and a thread that is ending: refused
        // here, before CF starts anything.
        try admitNested()
        return runOnce(mode: mode, seconds: seconds, returnAfterSourceHandled)
    }
}
