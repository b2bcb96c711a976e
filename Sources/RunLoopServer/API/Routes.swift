import MicroHTTP
import Foundation
import Primitives
import RunLoopCore
import RunLoopStore

/// Bounds of the HTTP control plane (beyond the engine's `Limits`).
public struct APILimits: Sendable, Hashable {
    /// Longest wait a request may ask for (`timeout` of a perform, a manual
    /// run's `seconds`), in seconds.
    public var maxWaitSeconds: Double = 300
    /// How long `stop` waits for the run it stopped to return before 504.
    public var stopWaitSeconds: Double = 10
    /// How long `DELETE /api/threads/{id}` waits for the thread to be joined.
    public var endWaitSeconds: Double = 15
    /// Event-stream clients at once.
    public var maxEventClients = 32
    /// Event-stream clients at once from one address (0: no limit).
    public var maxEventClientsPerAddress = 8
    /// Shortest interval of a repeating timer, in seconds. CF halts the
    /// process when a repeating timer's interval rounds to 0 ns, and a
    /// shorter one would only spin the loop.
    public var minTimerInterval: Double = 0.0001
    /// Largest `limit` of `GET /api/threads` (`--max-thread-page`).
    public var maxThreadPage = 1000
    /// Shortest time between two `snapshot` events of a `scope=summary`
    /// stream, in milliseconds (`--stream-snapshot-ms`).
    public var streamSnapshotMs = 250
    /// Most bytes per second a `scope=summary` stream is sent
    /// (`--stream-max-bytes`): past it snapshots come less often and inspected
    /// events are skipped (and counted in the next snapshot). It bounds the
    /// stream's CPU too: building and sending a snapshot costs about 40 ms of
    /// a core per megabyte (BENCHMARKS.md, "A thousand threads").
    public var streamMaxBytesPerSecond = 1_000_000
    /// Most threads one stream may inspect (`--stream-max-inspect`).
    public var streamMaxInspect = 64

    /// The defaults.
    public init() {}
}

/// The `/api` endpoints (`openapi.json` is their contract, `docs/api.md` the
/// guide), run on the control loop's thread. Grouped by resource:
/// `ThreadRoutes`, `PerformRoutes`, `TimerRoutes`, `SourceRoutes`,
/// `ObserverRoutes`, `TaskRoutes`; the meta routes are here.
struct API: Sendable {
    let registry: WorkerRegistry
    let events: EventHub
    let limits: APILimits
    let version: Value
    /// The journal of state-changing requests.
    let journal: Journal
    /// The experiment files.
    let experiments: ExperimentLibrary
    /// The history store's recorder (nil without a store).
    var history: HistoryRecorder? = nil
    /// This process as `/api/fleet` shows it.
    var instance: @Sendable () -> InstanceRecord? = { nil }
    /// The OpenAPI document (built once: it depends only on the configuration).
    let openAPI: Value
    /// The serial queues beside the control loop where predictions
    /// (`/predict`, `/why`) and journal exports (`GET /api/journal`) are
    /// built, so a long play never holds the other requests (the service's
    /// own, which `/metrics` reads; tests that only route get fresh ones).
    var offloads = OffloadQueues()
    var predictions: OffloadQueue { offloads.predictions }
    var exports: OffloadQueue { offloads.exports }

    /// Answers a request off the control loop: `work` runs on `queue`
    /// (`predictions` or `exports`), in arrival order, and its answer (200)
    /// or error goes to the caller from there. What it reads of a loop is
    /// read when it starts.
    func offload(
        _ ctx: RouteContext, on queue: OffloadQueue, _ work: @escaping @Sendable () throws(RunLoopError) -> Value
    ) -> Reply {
        queue.async({ Result { () throws(RunLoopError) -> Value in try work() } }) { answer in
            switch answer {
            case .success(let value): ctx.reply(200, value)
            case .failure(let error): ctx.fail(error)
            }
        }
        return .deferred
    }

    /// Every route of the API, frozen for answering.
    func makeRouter() -> RouterResponder {
        var r = Router()
        // Constant documents are serialized once: every request gets the same bytes.
        let versionResponse = APIResponses.json(200, version)
        r.add(.get, "/api/version") { _ throws(RunLoopError) in .response(versionResponse) }
        let openAPIResponse = APIResponses.json(200, openAPI)
        r.add(.get, "/api/openapi.json") { _ throws(RunLoopError) in .response(openAPIResponse) }
        r.add(.get, "/api/selectors") { _ throws(RunLoopError) in
            .json(200, ["selectors": .array(registry.selectors.all.map(Rep.selector))])
        }
        r.add(.get, "/api/events") { ctx throws(RunLoopError) in
            let scope = try StreamScope(ctx.request.query, limits: limits)
            // A summary stream's first snapshot carries the threads; its hello does not.
            return try events.open(
                ctx, scope: scope, threads: scope == nil ? registry.allWorkers.map { Rep.thread($0.snapshot) } : [])
        }
        addThreads(&r)
        addExplain(&r)
        addPredict(&r)
        addPerform(&r)
        addTimers(&r)
        addSources(&r)
        addModesAndObservers(&r)
        addTasks(&r)
        addLab(&r)
        addHistory(&r)
        addSetup(&r)
        return r.buildResponder()
    }

    /// A `since` query parameter (a sequence number): digits only, no sign; a
    /// number beyond `UInt64` is past every record. Nil when absent.
    static func sinceParameter(_ ctx: RouteContext, what: String) throws(RunLoopError) -> UInt64? {
        guard let text = ctx.request.query["since"] else { return nil }
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            throw .badValue("since", "since must be a non-negative whole number (\(what))")
        }
        return UInt64(text) ?? .max
    }

    /// The `{mode}` path parameter as a mode.
    static func pathMode(_ ctx: RouteContext) throws(RunLoopError) -> RunLoopMode {
        do throws(RunLoopError) {
            return try RunLoopMode(ctx.param("mode"))
        } catch {
            throw .badValue("mode", error.message)
        }
    }

    func worker(_ ctx: RouteContext) throws(RunLoopError) -> Worker {
        try registry.worker(ctx.param("id"))
    }
}

extension ReplyOnce where Answer == HTTPResponse {
    /// Answers with the exit of a run (200) or why there is none.
    func answer(exit result: Result<RunExit, RunLoopError>) {
        switch result {
        case .success(let exit): answer(APIResponses.json(200, Rep.exit(exit)))
        case .failure(let error): answer(APIResponses.error(error))
        }
    }

    /// Answers 504 `deadline_exceeded` with `message` after `seconds` unless an
    /// answer came first; the first answer cancels the deadline (nothing stays
    /// queued behind a fast reply).
    func expire(after seconds: Double, message: @escaping @Sendable () -> String) {
        expire(after: seconds) {
            APIResponses.error(RunLoopError(kind: .deadline, code: .deadlineExceeded, message: message()))
        }
    }
}
