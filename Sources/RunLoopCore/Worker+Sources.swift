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
            try b.sources.checkRoom("too_many_sources", "sources", thread: id)
        }
        let sourceId = ids.next("s")
        let record = try UserSource(id: sourceId, spec: checked, queueLimit: limits.portQueueSize) {
            [weak self] source, messages in
            self?.sourceFired(source, messages: messages)
        }
        let loop = book.withLock { b in
            b.sources.insert(record, id: sourceId)
            b.filled(checked.mode.name)
            return b.loop
        }
        if let loop { CFRunLoopAddSource(loop, record.source, checked.mode.cfMode) }
        touch()
        unwarn("loop_cannot_wake")
        watchModes([checked.mode.name], item: sourceId, kind: "source") { worker in
            (try? worker.userSource(sourceId))?.isValid ?? false
        }
        return record.snapshot
    }

    private func sourceFired(_ source: UserSource, messages: [PortMessage]) {
        let kind: CalloutKind = source.spec.kind == .port ? .port : .source
        callout(CalloutRef(kind: kind, id: source.id, selector: source.spec.action?.selector)) {
            if let action = source.spec.action { _ = runSelector(action) }
        }
        unwarn("lost_wakeup", subject: source.id)
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
                "wrong_kind", "source \(sourceId) is a port source: send it a message instead", field: "sourceId")
        }
        guard record.isValid else { throw .conflict("source_invalid", "source \(sourceId) was invalidated") }
        guard let loop = runLoop else { throw Worker.exitedError(id) }
        record.signal(on: loop, wakeUp: wakeUp)
        if !wakeUp && CFRunLoopIsWaiting(loop) { watchLostWakeup(record) }
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
        // Recorded before CF removes it, so a run that finds the mode empty
        // at that moment already knows what emptied it; once only.
        if record.isValid {
            book.withLock { $0.removed("source", sourceId, how: "was invalidated", from: record.spec.mode.name) }
        }
        record.invalidate()
        unwarn("lost_wakeup", subject: sourceId)
        return record.snapshot
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
                "lost_wakeup", severity: "warning", subjects: [record.id],
                message:
                    "source \(record.id) was signalled without a wake-up while \(worker.id) slept: it stays unhandled until something wakes the loop (call CFRunLoopWakeUp after CFRunLoopSourceSignal)",
                details: ["mode": .string(record.spec.mode.name), "afterMs": .number((after * 1000).rounded())])
        }
    }
}
