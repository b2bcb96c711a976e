import CoreFoundation
import Foundation

/// What swift-corelibs CF leaves in a mode's timer descriptor.
///
/// On Linux each mode has a timerfd armed at its earliest timer's fire
/// date (`__CFArmNextTimerInMode`). When the last timer leaves a mode CF
/// means to disarm it, but the disarm is guarded by `_mkTimerArmed`, which
/// only the dispatch-timer build sets: the timerfd stays armed. At the old
/// date it wakes the loop, `__CFRunLoopDoTimers` finds nothing to fire, and
/// the turn is a wake-up with no callout (and, if the mode is now empty,
/// the run returns `finished` then). runloopd notes that date per mode so
/// the predictor knows it.
extension Worker {
    /// Timers `leaving` (id and fire date) are about to leave `modes`:
    /// where no other timer stays, the mode's timerfd keeps the earliest of
    /// their dates; where one stays, CF re-arms at it.
    func noteTimersLeaving(_ leaving: [(id: String, next: CFAbsoluteTime)], from modes: [String]) {
        guard !leaving.isEmpty else { return }
        let (records, delayed, names, common) = book.withLock { b in
            (b.timers.all, b.performs.delayedTimers, b.expand(modes), b.commonModes)
        }
        let ids = Set(leaving.map(\.id))
        let due = leaving.map(\.next).min() ?? 0
        var stale: [String: CFAbsoluteTime?] = [:]
        for name in names {
            let stays =
                records.contains { !ids.contains($0.id) && $0.isValid && $0.isIn(name, common: common) }
                || delayed.contains { request, timer in
                    !ids.contains(request.id) && CFRunLoopTimerIsValid(timer)
                        && request.modes.contains { $0.name == name || ($0.isCommon && common.contains(name)) }
                }
            // Past dates too: an expired timerfd waits, readable, for a run in its mode.
            stale[name] = stays ? .some(nil) : .some(due)
        }
        book.withLock { b in
            for (name, date) in stale { b.timerfdStale[name] = date }
        }
    }

    /// A timer was added to `modes`: CF re-arms their timerfds.
    func noteTimerAdded(to modes: [String]) {
        book.withLock { b in
            for name in b.expand(modes) { b.timerfdStale[name] = nil }
        }
    }

    /// The fire date of a timer record (nil once it cannot fire).
    static func fireDate(_ timer: CFRunLoopTimer) -> CFAbsoluteTime? {
        CFRunLoopTimerIsValid(timer) ? CFRunLoopTimerGetNextFireDate(timer) : nil
    }
}
