/// Something a worker's loop did, for live views (the HTTP event stream).
/// Delivered on the thread where it happened; a sink must not block.
public enum RunLoopEvent: Sendable {
    /// A worker was created, parked, unparked, asked to end, or its thread ended.
    case thread(WorkerSnapshot, change: ThreadChange)
    /// A run returned.
    case runExit(thread: String, exit: RunExit)
    /// A timer fired.
    case timer(thread: String, timer: String, fires: Int, latenessMs: Double, valid: Bool)
    /// A perform ran (or was answered without running).
    case perform(thread: String, result: PerformResult)
    /// A user source fired.
    case source(thread: String, source: String, kind: SourceKind, fired: Int, messages: Int)
    /// A source's schedule or cancel routine ran for a mode, or a timer was
    /// added to or removed from a mode (`kind`: source or timer; `change`:
    /// scheduled or cancelled).
    case itemMode(thread: String, kind: String, item: String, mode: String, change: String)
    /// An idle task was added, ran, finished, failed or was removed.
    case task(thread: String, task: String, change: TaskChange, runs: Int)
    /// An observer saw an activity.
    case activity(thread: String, record: ActivityRecord)
    /// A turn of a run ended (the loop went to sleep or the run returned).
    case turn(thread: String, turn: TurnRecord)
    /// A warning appeared, changed severity, or stopped being active.
    case warning(LoopWarning)
    /// A callout crossed a stall threshold while still running.
    case stall(Stall, change: StallChange)
    /// A stalled callout returned (`ms`: how long it ran in all).
    case stallEnded(Stall)
}

/// What happened to a worker's thread (the `change` of a `thread` event).
public enum ThreadChange: String, Sendable, CaseIterable, Hashable {
    /// The thread started and its loop exists.
    case created
    /// A `loop`-style worker's mode is empty: it waits until something is added.
    case parked
    /// Something was added: the parked worker runs again.
    case unparked
    /// `end` was asked: the loop is being stopped.
    case ending
    /// The thread ended.
    case exited
}

/// What happened to an idle task (the `change` of a `task` event).
public enum TaskChange: String, Sendable, CaseIterable, Hashable {
    /// Queued.
    case added
    /// Its run began (at a `beforeWaiting`).
    case started
    /// It ran and asked to run again on a later turn.
    case ran
    /// It ran and is done (removed).
    case finished
    /// It failed (removed).
    case failed
    /// Removed by a caller.
    case removed
}
