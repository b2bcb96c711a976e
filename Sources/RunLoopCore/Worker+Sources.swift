import CoreFoundation
import Foundation

/// User sources: custom (version 0) and port (version 1). Public methods are
/// called from any thread; perform routines run on the worker's thread.
extension Worker {
    /// Adds a custom (version-0) or port (version-1) source in `spec.mode`.
    public func addSource(_ spec: SourceSpec) throws(RunLoopError) -> SourceSnapshot {
        var checked = spec
        if let action = spec.action { checked.action = try selectors.validate(action, field: "action") }
        try book.withLock { b throws(RunLoopError) in
            try b.checkAlive(id)
            try b.sources.checkRoom(.tooManySources, "sources", thread: id)
        }
        let record = try makeSource(checked)
        let (loop, pruned) = book.withLock { b in
            b.filled(checked.mode.name)
            return (b.loop, b.sources.insert(record, id: record.id))
        }
        _ = pruned  // released after the lock
        if let loop { CFRunLoopAddSource(loop, record.source, checked.mode.cfMode) }
        touch()
        noteMode(checked.mode)
        unwarn(.loopCannotWake)
        unwarn(.emptyModeAsleep)
        // No `mode_never_runs` watch here: an unsignalled source waits for
        // nothing. Signals and messages start the watch.
        return record.snapshot
    }

    /// A new source record (not yet in the loop or the book).
    func makeSource(_ spec: SourceSpec) throws(RunLoopError) -> UserSource {
        try UserSource(
            id: ids.next("s"), spec: spec, queueLimit: limits.portQueueSize,
            onFire: { [weak self] source, messages in self?.sourceFired(source, messages: messages) },
            onModeChange: { [weak self] source, mode, scheduled in
                guard let self else { return }
                self.emit(
                    .itemMode(
                        thread: self.id, kind: "source", item: source.id, mode: mode,
                        change: scheduled ? "scheduled" : "cancelled"))
            })
    }

    private func sourceFired(_ source: UserSource, messages: [PortMessage]) {
        let kind: CalloutKind = source.spec.kind == .port ? .port : .source
        callout(CalloutRef(kind: kind, id: source.id, selector: source.spec.action?.selector)) {
            guard let action = source.spec.action else { return }
            // A port's handler runs once per message and receives it
            // (`handlePortMessage:`); a custom source's once per perform.
            if source.spec.kind == .port {
                for message in messages { source.recordAction(runSelector(action, message: message).map(\.value)) }
            } else {
                source.recordAction(runSelector(action).map(\.value))
            }
        }
        unwarn(.lostWakeup, subject: source.id)
        let snap = source.snapshot
        emit(
            .source(thread: id, source: source.id, kind: source.spec.kind, fired: snap.fired, messages: messages.count))
    }

    func userSource(_ sourceId: String) throws(RunLoopError) -> UserSource {
        guard let record = book.withLock({ $0.sources[sourceId] }) else { throw .notFound("source", sourceId) }
        return record
    }

    /// One source, by id.
    public func sourceSnapshot(_ sourceId: String) throws(RunLoopError) -> SourceSnapshot {
        try userSource(sourceId).snapshot
    }

    /// Every source, in creation order.
    public func sourceSnapshots() -> [SourceSnapshot] {
        book.withLock { $0.sources.all }.map(\.snapshot)
    }

    /// `CFRunLoopSourceSignal` on a custom source, plus `CFRunLoopWakeUp` when `wakeUp`.
    public func signalSource(_ sourceId: String, wakeUp: Bool) throws(RunLoopError) -> SourceSnapshot {
        let record = try userSource(sourceId)
        guard record.spec.kind == .custom else {
            throw .conflict(
                .wrongKind, "source \(sourceId) is a port source: send it a message instead", field: "sourceId")
        }
        guard record.isValid else { throw .conflict(.sourceInvalid, "source \(sourceId) was invalidated") }
        guard let loop = runLoop else { throw Worker.exitedError(id) }
        let fresh = record.signal(on: loop, wakeUp: wakeUp)
        if !wakeUp && CFRunLoopIsWaiting(loop) { watchLostWakeup(record) }
        if fresh { watchWaitingSource(record) }
        return record.snapshot
    }

    /// Queues a message on a port source and rings its eventfd.
    public func sendMessage(toSource sourceId: String, msgid: Int, data: String) throws(RunLoopError)
        -> SourceSnapshot
    {
        let record = try userSource(sourceId)
        guard record.spec.kind == .port else {
            throw .conflict(
                .wrongKind, "source \(sourceId) is a custom source: signal it instead", field: "sourceId")
        }
        guard data.utf8.count <= limits.maxMessageBytes else {
            throw .badValue("data", "data must be at most \(limits.maxMessageBytes) bytes")
        }
        if try record.post(msgid: msgid, data: data) { watchWaitingSource(record) }
        return record.snapshot
    }

    /// `CFRunLoopSourceInvalidate` (the cancel routine runs; a port's eventfd is
    /// closed after the source is gone). Like CF, it does not wake the loop:
    /// `wakeUp` adds a `CFRunLoopWakeUp` after it.
    public func invalidateSource(_ sourceId: String, wakeUp: Bool = false) throws(RunLoopError) -> SourceSnapshot {
        let record = try userSource(sourceId)
        // Recorded before CF removes it, so a run that finds the mode empty
        // at that moment already knows what emptied it; once only.
        let how = record.spec.role == .keepAlive ? "(the keep-alive port) was invalidated" : "was invalidated"
        if record.isValid {
            // The modes first: `ItemModes` has a lock of its own, never taken under the book's.
            let modes = record.modes
            book.withLock { b in
                for mode in modes { b.removed("source", sourceId, how: how, from: mode) }
            }
        }
        let modes = record.modes
        record.invalidate()
        unwarn(.lostWakeup, subject: sourceId)
        afterRemoval(from: modes, wakeUp: wakeUp)
        return record.snapshot
    }

    /// `CFRunLoopAddSource` in one more mode (CF keeps one source in any
    /// number of modes; its schedule routine runs per mode).
    public func addSourceMode(_ sourceId: String, mode: RunLoopMode) throws(RunLoopError) -> SourceSnapshot {
        let record = try userSource(sourceId)
        _ = try addToMode(record, kind: "source", itemId: sourceId, mode: mode) {
            CFRunLoopAddSource($0, record.source, mode.cfMode)
        }
        return record.snapshot
    }

    /// `CFRunLoopRemoveSource` from one mode (its cancel routine runs for that
    /// mode); the source stays valid in its other modes.
    public func removeSourceMode(_ sourceId: String, mode: RunLoopMode, wakeUp: Bool = false) throws(RunLoopError)
        -> SourceSnapshot
    {
        let record = try userSource(sourceId)
        try removeFromMode(record, kind: "source", itemId: sourceId, mode: mode, wakeUp: wakeUp) {
            CFRunLoopRemoveSource($0, record.source, mode.cfMode)
        }
        return record.snapshot
    }

    /// After something left `modes`: CF notices an emptied mode only when the
    /// loop next turns, and `CFRunLoopRemoveSource`, `CFRunLoopSourceInvalidate`
    /// and `CFRunLoopTimerInvalidate` never wake it. So, as in CF, a loop asleep
    /// in a mode this emptied sleeps on (`empty_mode_asleep` says so) unless
    /// the request asked for a wake-up (`wakeUp`): then the run returns
    /// `finished` at once (documented in docs/api.md).
    func afterRemoval(from modes: [String], wakeUp: Bool) {
        guard
            let (loop, seq, mode) = book.withLock({ b -> (CFRunLoop, Int, String?)? in
                guard !b.exited, let loop = b.loop else { return nil }
                return (loop, b.runStack.last?.seq ?? 0, b.runStack.last?.mode)
            })
        else { return }
        if wakeUp {
            CFRunLoopWakeUp(loop)
            return
        }
        guard let mode, book.withLock({ $0.expand(modes) }).contains(mode) else { return }
        // Asleep now, or about to be: CF may have checked the mode just before
        // the removal and be on its way to sleep; look again a moment later.
        if !checkEmptyModeAsleep(run: seq, mode: mode) {
            later(diagnostics.options.lostWakeupAfter) { _ = $0.checkEmptyModeAsleep(run: seq, mode: mode) }
        }
    }

    /// Raises `empty_mode_asleep` when run `run` still sleeps in `mode` and the
    /// mode holds nothing (no source, timer or perform). Returns whether it did.
    @discardableResult
    func checkEmptyModeAsleep(run: Int, mode: String) -> Bool {
        guard
            let (loop, contents, seconds, stale) = book.withLock({
                b -> (CFRunLoop, LoopContents, Double, CFAbsoluteTime?)? in
                guard !b.exited, let loop = b.loop, let frame = b.runStack.last, frame.seq == run, frame.mode == mode
                else { return nil }
                return (loop, b.contents, frame.seconds, b.timerfdStale[mode])
            })
        else { return false }
        guard CFRunLoopIsWaiting(loop), contents.isEmpty(mode) else { return false }
        var details: [String: Value] = [
            "mode": .string(mode), "run": .number(Double(run)), "seconds": .number(seconds),
        ]
        let wake =
            "wake it (POST /api/threads/\(id)/wakeup, or ?wakeup=true on the DELETE) and the run returns finished"
        let message: String
        if let stale {
            // CF on Linux leaves the mode's timerfd armed at the removed
            // timer's date (Worker+Timerfd.swift): one wake-up is still due.
            let inSeconds = max(0, stale - CFAbsoluteTimeGetCurrent())
            details["wakesInMs"] = .number((inSeconds * 1000).rounded())
            message =
                "\(id) sleeps in \(mode), which is now empty: CF checks for an empty mode only after a wake-up, and removing a source or timer does not wake it; "
                + "the mode's timer descriptor is still armed at a removed timer's fire date (CF on Linux does not disarm it), so the loop wakes once "
                + String(format: "in %.2f s", inSeconds)
                + ", finds nothing to fire and the run returns finished then; to end it sooner, " + wake
        } else {
            message =
                "\(id) sleeps in \(mode), which is now empty, and nothing left in it can wake the loop: CF checks for an empty mode only after a wake-up, and removing a source or timer does not wake it; "
                + wake + (seconds < 1e9 ? ", or it times out after \(ExitCause.seconds(seconds))" : "")
        }
        warn(.emptyModeAsleep, severity: "warning", subjects: [mode], message: message, details: details)
        return true
    }

    /// A source with work waiting (signalled, or a message queued): if its
    /// modes do not run, `mode_never_runs` says so.
    private func watchWaitingSource(_ record: UserSource) {
        watchModes(record.modes, item: record.id, kind: record.spec.kind == .port ? "port" : "source") { _ in
            record.hasWorkWaiting
        }
    }

    /// A source signalled without a wake-up on a sleeping loop: if it is
    /// still unhandled and the loop still asleep a moment later, the wake-up
    /// was lost (CF handles version-0 sources only on a turn, and a sleeping
    /// loop takes no turn until something wakes it).
    private func watchLostWakeup(_ record: UserSource) {
        let after = diagnostics.options.lostWakeupAfter
        later(after) { worker in
            guard record.isValid, record.snapshot.signalled, let loop = worker.runLoop, CFRunLoopIsWaiting(loop)
            else { return }
            worker.warn(
                .lostWakeup, severity: "warning", subjects: [record.id],
                message:
                    "source \(record.id) was signalled without a wake-up while \(worker.id) slept: it stays unhandled until something wakes the loop (call CFRunLoopWakeUp after CFRunLoopSourceSignal)",
                details: [
                    "mode": .string(record.modes.first ?? record.spec.mode.name),
                    "afterMs": .number((after * 1000).rounded()),
                ])
        }
    }
}
