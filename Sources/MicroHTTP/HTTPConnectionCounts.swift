/// The HTTP layer's connections now and what its budgets closed since start
/// (`HTTPServer.connectionCounts`, for metrics).
public struct HTTPConnectionCounts: Equatable, Sendable {
    /// Connections shut down for passing the deadline.
    public var expired: Int
    /// Connections shut down to keep the pending ones within the cap.
    public var evicted: Int
    /// Connections shut down to keep headroom in the connection table.
    public var crowded: Int
    /// Connections pending now (reading a request, or idle between requests).
    public var pending: Int
    /// Connections open now.
    public var open: Int
    /// Requests refused 400 for their framing (RFC 9112) since start.
    public var badFraming = 0
    /// Event streams ended at once because their client hung up, since start.
    public var streamsHungUp = 0
    /// Bytes of queued answers their clients have not taken yet (`--max-held-answer-bytes`).
    public var heldAnswerBytes = 0
    /// Answers replaced by 503 `answers_over_budget` since start.
    public var answersOverBudget = 0

    /// Every count given (tests, and zeros before the server starts).
    public init(
        expired: Int = 0, evicted: Int = 0, crowded: Int = 0, pending: Int = 0, open: Int = 0, badFraming: Int = 0,
        streamsHungUp: Int = 0
    ) {
        self.expired = expired
        self.evicted = evicted
        self.crowded = crowded
        self.pending = pending
        self.open = open
        self.badFraming = badFraming
        self.streamsHungUp = streamsHungUp
    }
}
