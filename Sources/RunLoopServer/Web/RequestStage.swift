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

    /// This stage in front of `next`, as one closure. `StageResponder` calls
    /// it once, at start; a request then runs a chain of closures, each
    /// holding one stage, with no generic type to resolve on the way.
    func responder(before next: @escaping @Sendable (Input) -> StageResult) -> @Sendable (Input) -> StageResult
}

extension RequestStage {
    func responder(before next: @escaping @Sendable (Input) -> StageResult) -> @Sendable (Input) -> StageResult {
        { self.handle($0, next: next) }
    }
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

    /// `first`'s closure, whose `next` is `second`'s closure.
    func responder(before next: @escaping @Sendable (First.Input) -> StageResult)
        -> @Sendable (First.Input) -> StageResult
    {
        first.responder(before: second.responder(before: next))
    }
}

extension RequestStage {
    /// This stage, then `stage`.
    func then<Next: RequestStage>(_ stage: Next) -> StagePair<Self, Next> where Next.Input == Input {
        StagePair(first: self, second: stage)
    }
}

/// A composed path as one responder: its stages in order, and its end (what
/// answers a request every stage passed on). Made once, as a chain of one
/// closure per stage (`responder(before:)`): a request calls each stage's
/// `handle` directly. (Calling the nested `StagePair` type's `handle` instead
/// looked its generic metadata up on every request, about 3,500
/// instructions.)
struct StageResponder<Input: Sendable>: Sendable {
    private let path: @Sendable (Input) -> StageResult

    init<Path: RequestStage>(_ path: Path, end: @escaping @Sendable (Input) -> StageResult) where Path.Input == Input {
        self.path = path.responder(before: end)
    }

    func respond(_ input: Input) -> StageResult { path(input) }
}
