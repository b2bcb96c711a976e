/// The loop's words the model and the engine share: who put an item in the
/// loop, the activities an observer watches, how a perform reaches the loop.

/// Who put a timer or source in the loop: the user, or runloopd itself (the
/// hidden objects Cocoa keeps too: a keep-alive, an `afterDelay` perform's timer).
public enum ItemRole: String, Sendable, CaseIterable, Hashable {
    /// Added through the API.
    case user
    /// The thread's keep-alive port or timer.
    case keepAlive
    /// The one-shot timer of an `afterDelay` perform.
    case performDelay
}

/// A run-loop activity an observer can watch (`CFRunLoopActivity`).
public enum Activity: String, Sendable, CaseIterable, Hashable {
    /// `kCFRunLoopEntry` (1).
    case entry
    /// `kCFRunLoopBeforeTimers` (2).
    case beforeTimers
    /// `kCFRunLoopBeforeSources` (4).
    case beforeSources
    /// `kCFRunLoopBeforeWaiting` (32).
    case beforeWaiting
    /// `kCFRunLoopAfterWaiting` (64).
    case afterWaiting
    /// `kCFRunLoopExit` (128).
    case exit
}

/// How a queued perform reaches a worker's loop.
public enum PerformVia: String, Sendable, CaseIterable, Hashable {
    /// `performSelector:onThread:` (a version-0 source per mode, signalled
    /// and the loop woken) or, with `afterDelay`, a one-shot timer: a
    /// handled source for `returnAfterSourceHandled` (the timer never is).
    case selector
    /// `CFRunLoopPerformBlock` followed by `CFRunLoopWakeUp`: CF keeps the
    /// block in the loop's block list, which keeps its modes from being
    /// empty, and runs it in `__CFRunLoopDoBlocks`; running it never counts
    /// as a handled source.
    case block

    /// How a block perform leaves its modes (the explainer's last removal).
    package static let ranHow = "ran (CF drops a block from its list when it runs it)"
}
