/// One stage of the request path (Hummingbird 2's middleware shape, made
/// synchronous): given the request and the rest of the path as `next`, a
/// stage answers (`.answer`), hands the request on (`.handedOn`: it is
/// answered elsewhere, later), or returns what `next` returns. A stage never
/// keeps `next`; it may look at what `next` returned before returning it.
///
/// The stages are composed once, at start, into a `StageResponder`
/// (`RequestPaths`), and each is a value a test can run alone with a `next`
/// of its own (`Tests/RunLoopServerTests/RequestStageTests.swift`).
protocol RequestStage<Input>: Sendable {
    /// What travels the path: an `Exchange` on the HTTP thread, a
    /// `RunLoopService.Job` on the control loop's.
    associatedtype Input: Sendable

    func handle(_ input: Input, next: (Input) -> StageResult) -> StageResult
}

/// Two stages as one: `first` runs, and its `next` is `second` (whose own
/// `next` is the rest of the path).
struct StagePair<First: RequestStage, Second: RequestStage>: RequestStage where First.Input == Second.Input {
    let first: First
    let second: Second

    @inline(__always)
    func handle(_ input: First.Input, next: (First.Input) -> StageResult) -> StageResult {
        first.handle(input) { second.handle($0, next: next) }
    }
}

extension RequestStage {
    /// This stage, then `stage`.
    func then<Next: RequestStage>(_ stage: Next) -> StagePair<Self, Next> where Next.Input == Input {
        StagePair(first: self, second: stage)
    }
}

/// A composed path as one responder: its stages in order, and its end (what
/// answers a request every stage passed on). Made once; the stages inside
/// are one concrete type, so the optimizer sees the whole path.
struct StageResponder<Input: Sendable>: Sendable {
    private let path: @Sendable (Input) -> StageResult

    init<Path: RequestStage>(_ path: Path, end: @escaping @Sendable (Input) -> StageResult) where Path.Input == Input {
        self.path = { path.handle($0, next: end) }
    }

    func respond(_ input: Input) -> StageResult { path(input) }
}
