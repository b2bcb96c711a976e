import CoreFoundation
import Foundation

/// What a user asks for when performing a selector on a worker
/// (`performSelector:onThread:withObject:waitUntilDone:modes:`).
public struct PerformSpec: Sendable {
    /// The selector and arguments.
    public var call: SelectorCall
    /// The modes it may run in (default: common).
    public var modes: [RunLoopMode]
    /// Seconds to wait before queueing it (`afterDelay:`: a one-shot timer on the target loop).
    public var afterDelay: Double

    /// Creates a spec.
    public init(call: SelectorCall, modes: [RunLoopMode] = [.common], afterDelay: Double = 0) {
        self.call = call
        self.modes = modes
        self.afterDelay = afterDelay
    }
}

/// The answer to one perform.
public struct PerformResult: Sendable {
    /// The perform's id.
    public var performId: String
    /// The worker's id.
    public var thread: String
    /// The selector name.
    public var selector: String
    /// The selector's value, or why there is none (failed, deadline, worker ended, cancelled).
    public var outcome: Result<Value, RunLoopError>
    /// Milliseconds between queueing and the start of the run (0 if it never ran).
    public var queuedMs: Double
    /// Milliseconds the selector ran.
    public var ranMs: Double
}

/// A queued perform, shared by the per-mode command sources it was posted to:
/// whichever source runs it first claims it.
final class PerformRequest: @unchecked Sendable {
    enum Stage { case delayed, pending, running, done }

    let id: String
    let call: SelectorCall
    let modes: [RunLoopMode]
    let afterDelay: Double
    let queuedAt = Date()
    let queuedMono = Monotonic.now()
    /// Guarded by the owning worker's lock.
    var stage: Stage
    /// The one-shot timer of an `afterDelay` perform (guarded by the worker's lock).
    var timer: CFRunLoopTimer?
    var fireAt: Date?
    private let replyLock = NSLock()
    private var replied = false
    private var deadline: DeadlineToken?
    private let completion: (@Sendable (PerformResult) -> Void)?

    init(
        id: String, call: SelectorCall, modes: [RunLoopMode], afterDelay: Double,
        completion: (@Sendable (PerformResult) -> Void)?
    ) {
        self.id = id
        self.call = call
        self.modes = modes
        self.afterDelay = afterDelay
        self.stage = afterDelay > 0 ? .delayed : .pending
        self.completion = completion
    }

    /// Answers the caller once; later answers are dropped. `first` runs just
    /// before the answer is delivered, only for the answer that wins (so events
    /// and metrics are recorded before the caller can observe the result).
    /// Returns whether this answer was the one delivered.
    @discardableResult
    func reply(_ result: PerformResult, first: () -> Void = {}) -> Bool {
        replyLock.lock()
        let won = !replied
        replied = true
        let deadline = self.deadline
        self.deadline = nil
        replyLock.unlock()
        if won {
            deadline?.cancel()
            first()
            completion?(result)
        }
        return won
    }

    /// Keeps the caller's deadline so the first answer cancels it (at once when
    /// the answer already came).
    func setDeadline(_ token: DeadlineToken) {
        replyLock.lock()
        let answered = replied
        if !answered { deadline = token }
        replyLock.unlock()
        if answered { token.cancel() }
    }

    var snapshot: PerformSnapshot {
        PerformSnapshot(
            id: id, call: call, modes: modes.map(\.name), queuedAt: queuedAt, afterDelay: afterDelay, fireAt: fireAt)
    }
}
