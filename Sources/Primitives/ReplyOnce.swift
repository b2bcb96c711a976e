/// Answers a caller exactly once: the first of several possible answers (a
/// result, a deadline, the end of the thread or of the service) is delivered,
/// later ones are dropped. The one such guard in runloopd: performs, routes
/// and the HTTP layer's responses all use it.
///
/// A deadline attached with `expire(after:_:)` is cancelled by the first
/// answer, so nothing stays scheduled behind a fast reply.
///
/// Thread-safety: any thread may answer; `deliver` runs outside the lock on
/// the thread whose answer won.
public final class ReplyOnce<Answer>: Sendable {
    private struct State {
        var answered = false
        var deadline: DeadlineToken?
    }

    private let state = Locked(State())
    private let deliver: @Sendable (Answer) -> Void

    /// `deliver` receives the winning answer.
    public init(_ deliver: @escaping @Sendable (Answer) -> Void) {
        self.deliver = deliver
    }

    /// Whether an answer was delivered already.
    public var isAnswered: Bool { state.withLock { $0.answered } }

    /// Delivers `answer` unless one came first. `first` runs just before the
    /// delivery, only for the winning answer (for events and metrics that a
    /// caller who sees the answer may count on). Returns whether it won.
    @discardableResult
    public func answer(_ answer: Answer, first: () -> Void = {}) -> Bool {
        let deadline: DeadlineToken?? = state.withLock { s in
            guard !s.answered else { return .none }
            s.answered = true
            defer { s.deadline = nil }
            return .some(s.deadline)
        }
        guard let deadline else { return false }
        deadline?.cancel()
        first()
        deliver(answer)
        return true
    }

    /// Answers with `make()` after `seconds` unless an answer came first.
    /// `first` runs as in `answer(_:first:)`.
    public func expire(
        after seconds: Double, first: @escaping @Sendable () -> Void = {},
        _ make: @escaping @Sendable () -> Answer
    ) where Answer: Sendable {
        let token = Deadlines.after(seconds) { [self] in
            answer(make(), first: first)
        }
        let keep = state.withLock { s in
            guard !s.answered else { return false }
            s.deadline = token
            return true
        }
        if !keep { token.cancel() }
    }
}
