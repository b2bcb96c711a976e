/// Something a worker's loop did, for live views (the HTTP event stream).
/// Delivered on the thread where it happened; a sink must not block.
public enum RunLoopEvent: Sendable {
    /// A worker was created, parked, unparked, asked to end, or its thread ended.
    case thread(WorkerSnapshot, change: String)
    /// A run returned.
    case runExit(thread: String, exit: RunExit)
    /// A timer fired.
    case timer(thread: String, timer: String, fires: Int, latenessMs: Double, valid: Bool)
    /// A perform ran (or was answered without running).
    case perform(thread: String, result: PerformResult)
    /// A user source fired.
    case source(thread: String, source: String, kind: SourceKind, fired: Int, messages: Int)
    /// An idle task was added, ran, finished, failed or was removed.
    case task(thread: String, task: String, change: String, runs: Int)
    /// An observer saw an activity.
    case activity(thread: String, record: ActivityRecord)
}
