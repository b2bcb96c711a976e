import CoreFoundation
import Foundation

/// Observers and what they record, modes, and the state selectors keep (log
/// lines, counters). Public methods are called from any thread; observer
/// callouts and selectors run on the worker's thread.
extension Worker {
    /// Adds an observer; its activities go into the worker's ring.
    public func addObserver(_ spec: ObserverSpec) throws(RunLoopError) -> ObserverSnapshot {
        guard !spec.activities.isEmpty else { throw .badValue("activities", "name at least one activity") }
        var spec = spec
        if let action = spec.action { spec.action = try selectors.validate(action, field: "action") }
        let observerId = ids.next("ob")
        let record = ObserverRecord(id: observerId, spec: spec) { [weak self] record, activity in
            guard let self else { return }
            if activity == .exit { self.tracer.exitBegan() }
            self.callout(CalloutRef(kind: .observer, id: record.id, selector: record.spec.action?.selector)) {
                self.recordActivity(activity, observer: record.id)
                if let action = record.spec.action { record.recordAction(self.runSelector(action).map(\.value)) }
            }
        }
        let (loop, pruned) = try book.withLock { b throws(RunLoopError) in
            try b.checkAlive(id)
            try b.observers.checkRoom(.tooManyObservers, "observers", thread: id)
            return (b.loop, b.observers.insert(record, id: observerId))
        }
        _ = pruned  // released after the lock
        if let loop { CFRunLoopAddObserver(loop, record.observer, spec.mode.cfMode) }
        noteMode(spec.mode)
        return record.snapshot
    }

    private func recordActivity(_ activity: Activity, observer: String) {
        let mode = RunLoopMode.name(ofCF: CFRunLoopCopyCurrentMode(CFRunLoopGetCurrent())) ?? "none"
        let record = book.withLock { b in
            b.activitySeq += 1
            let record = ActivityRecord(
                seq: b.activitySeq, at: Date(), activity: activity, mode: mode, observer: observer)
            b.activity.append(record)
            return record
        }
        emit(.activity(thread: id, record: record))
    }

    /// `CFRunLoopObserverInvalidate` on one observer: it records nothing more.
    public func invalidateObserver(_ observerId: String) throws(RunLoopError) -> ObserverSnapshot {
        guard let record = book.withLock({ $0.observers[observerId] }) else {
            throw .notFound("observer", observerId)
        }
        record.invalidate()
        return record.snapshot
    }

    /// Every observer, in creation order.
    public func observerSnapshots() -> [ObserverSnapshot] {
        book.withLock { $0.observers.all }.map(\.snapshot)
    }

    /// Recorded activities with a sequence number above `since`, oldest first.
    public func activities(since: UInt64 = 0) -> [ActivityRecord] {
        book.withLock { $0.activity.elements.filter { $0.seq > since } }
    }

    // MARK: - Modes

    /// Every mode, the common set and the current mode.
    public func modes() -> ModesSnapshot {
        let (loop, common, current) = book.withLock { ($0.loop, $0.commonModes, $0.runStack.last?.mode) }
        var all: [String] = []
        if let loop, let array = CFRunLoopCopyAllModes(loop) {
            for index in 0..<CFArrayGetCount(array) {
                let raw = CFArrayGetValueAtIndex(array, index)
                let string = unsafeBitCast(raw, to: CFString.self)
                all.append(RunLoopMode.name(ofCF: string) ?? "?")
            }
        }
        return ModesSnapshot(all: all.sorted(), common: common, current: current)
    }

    /// `CFRunLoopAddCommonMode`: items added to common modes now also live in `mode`.
    public func addCommonMode(_ mode: RunLoopMode) throws(RunLoopError) -> ModesSnapshot {
        guard !mode.isCommon else { throw .badValue("mode", "common is the set itself, not a mode to add to it") }
        let loop = try book.withLock { b throws(RunLoopError) in
            try b.checkAlive(id)
            if !b.commonModes.contains(mode.name) { b.commonModes.append(mode.name) }
            return b.loop
        }
        if let loop { CFRunLoopAddCommonMode(loop, mode.cfMode) }
        touch()
        return modes()
    }

    // MARK: - Log and counters (selector state)

    /// Appends a line to the worker's log ring.
    public func appendLog(_ line: String) -> Int {
        book.withLock { b in
            b.logLines.append(line)
            return b.logLines.count
        }
    }

    /// The worker's log lines, oldest first.
    public var log: [String] { book.withLock { $0.logLines.items } }

    /// Adds `by` to the named counter; returns the new value.
    public func increment(_ counter: String, by: Int = 1) -> Int {
        book.withLock { b in
            b.counters[counter, default: 0] += by
            return b.counters[counter] ?? 0
        }
    }

    /// The named counters.
    public var counterValues: [String: Int] { book.withLock { $0.counters } }
}
