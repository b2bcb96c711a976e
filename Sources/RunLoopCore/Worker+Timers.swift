import CoreFoundation
import Foundation

/// Timers: `CFRunLoopTimer`s with fire counts and lateness. Public methods are
/// called from any thread; fires arrive on the worker's thread.
extension Worker {
    /// Adds a `CFRunLoopTimer` to the loop in `spec.mode`.
    public func addTimer(_ spec: TimerSpec) throws(RunLoopError) -> TimerSnapshot {
        try limits.checkSeconds(spec.interval, field: "interval", positive: true)
        if let delay = spec.delay { try limits.checkSeconds(delay, field: "delay") }
        try limits.checkSeconds(spec.tolerance, field: "tolerance")
        if let maxFires = spec.maxFires, maxFires < 1 { throw .badValue("maxFires", "maxFires must be >= 1") }
        var checked = spec
        if let action = spec.action { checked.action = try selectors.validate(action, field: "action") }
        let timerId = ids.next("tm")
        let record = TimerRecord(
            id: timerId, spec: checked, window: limits.latenessWindow,
            onFire: { [weak self] record, fires, late in self?.timerFired(record, fires: fires, lateness: late) },
            onInvalid: { [weak self, timerId] how in
                guard let self, let record = try? self.timerRecord(timerId) else { return }
                let modes = record.modes
                self.book.withLock { b in
                    b.liveTimers -= 1
                    for mode in modes { b.removed("timer", timerId, how: how, from: mode) }
                }
            })
        let (loop, pruned) = try book.withLock { b throws(RunLoopError) in
            try b.checkAlive(id)
            guard b.liveTimers < limits.maxTimersPerWorker else {
                throw .limit(
                    .tooManyTimers,
                    "thread \(id) already has \(b.liveTimers) timers (limit \(limits.maxTimersPerWorker))")
            }
            b.liveTimers += 1
            b.filled(checked.mode.name)
            return (b.loop, b.timers.insert(record, id: timerId))
        }
        _ = pruned  // released after the lock
        if let loop { CFRunLoopAddTimer(loop, record.timer, checked.mode.cfMode) }
        noteTimerAdded(to: [checked.mode.name])
        touch()
        noteMode(checked.mode)
        unwarn(.loopCannotWake)
        unwarn(.emptyModeAsleep)
        // A timer waits for something only once it is due: the check comes
        // that long after its first fire date.
        watchModes([checked.mode.name], item: timerId, kind: "timer", dueIn: checked.delay ?? checked.interval) {
            worker in
            guard let timer = try? worker.timerRecord(timerId), timer.isValid else { return false }
            return CFRunLoopTimerGetNextFireDate(timer.timer) <= CFAbsoluteTimeGetCurrent()
        }
        return record.snapshot
    }

    /// A fire: `lateness` is measured from the fire date CF had set, like the
    /// load's timer lag and `timer_behind`.
    private func timerFired(_ record: TimerRecord, fires: Int, lateness behind: Double) {
        callout(CalloutRef(kind: .timer, id: record.id, selector: record.spec.action?.selector)) {
            tracer.pending.timerLag.add(behind * 1000)
            if let action = record.spec.action {
                switch runSelector(action) {
                case .success: record.recordActionError(nil)
                case .failure(let error): record.recordActionError(error.message)
                }
            }
        }
        let (runStarted, idleSince) = book.withLock { b -> (Double?, Double) in
            b.timerFires += 1
            return (b.runStack.first?.startedMono, b.idleSinceMono)
        }
        emit(.timer(thread: id, timer: record.id, fires: fires, latenessMs: behind * 1000, valid: record.isValid))
        let interval = record.spec.interval
        // On a manual thread, a fire date that passed while no run was under way
        // (after the last run returned, before this one began) is the time nobody
        // ran the loop, not a loop falling behind (issue 39); /why says it runs only when asked.
        let due = Monotonic.now() - behind
        let dueWhileIdle = policy.style == .manual && due >= idleSince && due < (runStarted ?? .infinity)
        if record.spec.repeats && behind > interval && !dueWhileIdle {
            let skipped = Int((behind / interval).rounded(.down))
            warn(
                .timerBehind, severity: "warning", subjects: [record.id],
                message:
                    "timer \(record.id) fired \(Int((behind * 1000).rounded())) ms after the fire date CF had set (its lateness, as lateness.lastMs shows it), more than its \(ExitCause.seconds(interval)) interval: \(skipped) fire\(skipped == 1 ? " was" : "s were") skipped (CF never fires a repeating timer twice to catch up)",
                details: [
                    "behindMs": .number((behind * 1000).rounded()), "latenessMs": .number(behind * 1000),
                    "interval": .number(interval),
                    "skipped": .number(Double(skipped)),
                ])
        } else {
            unwarn(.timerBehind, subject: record.id)
        }
    }

    /// Every timer, in creation order; then the one-shot timers of `afterDelay`
    /// performs that have not fired (role `performDelay`, the perform's id).
    public func timerSnapshots() -> [TimerSnapshot] {
        let (records, delayed) = book.withLock { ($0.timers.all, $0.performs.delayedTimers) }
        return records.map(\.snapshot)
            + delayed.map { request, timer in
                let valid = CFRunLoopTimerIsValid(timer)
                return TimerSnapshot(
                    id: request.id, role: .performDelay, modes: request.modes.map(\.name), interval: 0,
                    repeats: false, delay: request.afterDelay, tolerance: 0,
                    mode: request.modes.first?.name ?? "default",
                    valid: valid, fires: 0, maxFires: 1,
                    nextFireAt: valid
                        ? Date(timeIntervalSinceReferenceDate: CFRunLoopTimerGetNextFireDate(timer)) : nil,
                    lateness: Lateness(), action: request.call, lastActionError: nil, createdAt: request.queuedAt)
            }
    }

    /// `CFRunLoopAddTimer` in one more mode (one timer may be in any number of modes).
    public func addTimerMode(_ timerId: String, mode: RunLoopMode) throws(RunLoopError) -> TimerSnapshot {
        let record = try timerRecord(timerId)
        defer { noteTimerAdded(to: [mode.name]) }
        if try addToMode(
            record, kind: "timer", itemId: timerId, mode: mode,
            add: {
                CFRunLoopAddTimer($0, record.timer, mode.cfMode)
            })
        {
            emit(.itemMode(thread: id, kind: "timer", item: timerId, mode: mode.name, change: "scheduled"))
        }
        return record.snapshot
    }

    /// `CFRunLoopRemoveTimer` from one mode; the timer stays valid in its others.
    public func removeTimerMode(_ timerId: String, mode: RunLoopMode, wakeUp: Bool = false) throws(RunLoopError)
        -> TimerSnapshot
    {
        let record = try timerRecord(timerId)
        if record.isValid && record.modes.contains(mode.name), let date = Self.fireDate(record.timer) {
            noteTimersLeaving([(timerId, date)], from: [mode.name])
        }
        try removeFromMode(record, kind: "timer", itemId: timerId, mode: mode, wakeUp: wakeUp) {
            CFRunLoopRemoveTimer($0, record.timer, mode.cfMode)
        }
        emit(.itemMode(thread: id, kind: "timer", item: timerId, mode: mode.name, change: "cancelled"))
        return record.snapshot
    }

    /// `CFRunLoopTimerInvalidate` on one timer. Like CF, it does not wake the
    /// loop: `wakeUp` adds a `CFRunLoopWakeUp` after it.
    public func invalidateTimer(_ timerId: String, wakeUp: Bool = false) throws(RunLoopError) -> TimerSnapshot {
        let record = try timerRecord(timerId)
        let modes = record.modes
        if let date = Self.fireDate(record.timer) { noteTimersLeaving([(timerId, date)], from: modes) }
        record.invalidate(
            how: record.spec.role == .keepAlive ? "(the keep-alive timer) was invalidated" : "was invalidated")
        afterRemoval(from: modes, wakeUp: wakeUp)
        return record.snapshot
    }

    /// One timer, by id (a lookup, not a scan of every timer).
    public func timerSnapshot(_ timerId: String) throws(RunLoopError) -> TimerSnapshot {
        try timerRecord(timerId).snapshot
    }

    func timerRecord(_ timerId: String) throws(RunLoopError) -> TimerRecord {
        guard let record = book.withLock({ $0.timers[timerId] }) else { throw .notFound("timer", timerId) }
        return record
    }
}
