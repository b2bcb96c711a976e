import Synchronization

/// Answers a caller exactly once: the first of several possible answers (a
/// result, a deadline, the end of the thread or of the service) is delivered,
/// later ones are dropped. The one such guard in runloopd: performs and routes
/// use it. (The HTTP layer's request context does not need one: "answered" is
/// one phase of its connection state machine, which also refuses an answer
/// that comes after the client has gone.)
///
/// A deadline attached with `expire(after:_:)` is cancelled by the first
/// answer, so nothing stays scheduled behind a fast reply.
///
/// Thread-safety: any thread may answer; `deliver` runs on the thread whose
/// answer won.
public final class ReplyOnce<Answer>: Sendable {
    // Two atomics instead of a lock: one is made per perform and per long
    // request, on the hot path.
    private let answered = Atomic<Bool>(false)
    /// The attached deadline's id; 0 when none.
    private let deadline = Atomic<UInt64>(0)
    private let deliver: @Sendable (Answer) -> Void

    /// `deliver` receives the winning answer.
    public init(_ deliver: @escaping @Sendable (Answer) -> Void) {
        self.deliver = deliver
    }

    /// Whether an answer was delivered already.
    public var isAnswered: Bool { answered.load(ordering: .acquiring) }

    /// Delivers `answer` unless one came first. `first` runs just before the
    /// delivery, only for the winning answer (for events and metrics that a
    /// caller who sees the answer may count on). Returns whether it won.
    @discardableResult
    public func answer(_ answer: Answer, first: () -> Void = {}) -> Bool {
        LockCheck.assertNoneHeld("answering a caller")
        guard !answered.exchange(true, ordering: .acquiringAndReleasing) else { return false }
        let token = deadline.exchange(0, ordering: .acquiringAndReleasing)
        if token != 0 { DeadlineToken(id: token).cancel() }
        first()
        deliver(answer)
        return true
    }

    /// Answers with `make()` after `seconds` unless an answer came first.
    /// `first` runs as in `answer(_:first:)`, given the answer `make` made
    /// (made only when the deadline passes: most are cancelled).
    public func expire(
        after seconds: Double, first: @escaping @Sendable (Answer) -> Void = { _ in },
        _ make: @escaping @Sendable () -> Answer
    ) where Answer: Sendable {
        let token = Deadlines.after(seconds) { [self] in
            let made = make()
            answer(made, first: { first(made) })
        }
        deadline.store(token.id, ordering: .releasing)
        // An answer that came in between found no deadline to cancel: cancel it
        // here (whichever side takes the id out of `deadline` cancels it).
        if answered.load(ordering: .acquiring), deadline.exchange(0, ordering: .acquiringAndReleasing) == token.id {
            token.cancel()
        }
    }
}
