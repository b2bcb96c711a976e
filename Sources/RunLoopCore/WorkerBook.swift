import CoreFoundation
import Foundation

/// Everything a `Worker` keeps about its loop, as one value behind the
/// worker's one lock (`Worker.book`). Nothing here calls out: methods on the
/// worker read and change it inside `book.withLock { ... }` and make their CF
/// calls and callbacks after the closure returns.
struct WorkerBook {
    // MARK: the thread and its loop

    /// The worker's run loop while its thread lives; nil once the thread ended
    /// (the worker lets go of it so CF can free it and close its descriptors).
    var loop: CFRunLoop?
    /// The worker's thread (set by the thread itself before the worker is handed out).
    var thread: pthread_t?
    var cancelled = false
    /// The thread is tearing down: new work is refused.
    var closing = false
    var exited = false
    var joined = false
    var endedAt: Date?
    var endWaiters: [@Sendable (WorkerSnapshot) -> Void] = []
    /// A `loop`-style worker whose mode is empty waits instead of spinning.
    var parked = false
    /// Bumped when something is added to the loop: a parked worker runs again.
    var generation = 0

    // MARK: runs

    var runSeq = 0
    var runStack: [RunFrame] = []
    /// When the thread last stopped running any run (its outermost run
    /// returned; 0: it never ran): a manual thread's timer due after it was due
    /// while nobody ran the loop (`timer_behind` stays quiet, issue 39).
    var idleSinceMono: Double = 0
    /// `mode_never_runs` checks that came due while this manual thread had no
    /// run under way: nobody asked it to run, so they wait for its next
    /// outermost run and count their time from there (issue 39).
    var parkedModeChecks: [@Sendable (Worker) -> Void] = []
    var runs = 0
    var exits: [ExitReason: Int] = [:]
    var lastExit: RunExit?
    /// The last `keptExits` run exits, kept after the thread ends: where an
    /// ended thread's runs returned, for its timeline lane (issue 39).
    var recentExits = Ring<RunExit>(capacity: WorkerBook.keptExits)
    static let keptExits = 32
    var stopWaiters: [(seq: Int, reply: RunReply)] = []
    var manualRequest: ManualRun?
    /// The internal `entry` observer (created by the loop thread) and the modes
    /// it was added to.
    var entryObserver: CFRunLoopObserver?
    /// The tracer's `beforeWaiting` observer (added with the entry observer).
    var sleepObserver: CFRunLoopObserver?
    var entryObserverModes = Set<String>()
    /// Per mode: the date its timerfd stays armed at after its last timer
    /// left (see `Worker.noteTimersLeaving`).
    var timerfdStale: [String: CFAbsoluteTime] = [:]

    // MARK: what the loop holds

    /// Timers, sources and observers by id; each table's limit is the
    /// per-worker limit of its kind (it refuses beyond it and prunes dead
    /// records past twice it).
    var timers: RecordTable<TimerRecord>
    /// Timers that can still fire (kept by the timers' `onInvalid`): adding the
    /// n-th timer must not cost a scan of n.
    var liveTimers = 0
    /// Timer fires over the thread's life (removed timers' included).
    var timerFires = 0
    var sources: RecordTable<UserSource>
    var observers: RecordTable<ObserverRecord>
    var commonModes: [String] = ["default"]
    var performs = PerformQueue()
    /// The id of the keep-alive port source or timer, if any.
    var keepAliveItem: String?
    /// The perform whose selector runs now.
    var runningPerform: (id: String, selector: String)?
    /// Answered performs, newest last (`Limits.performHistory`).
    var answeredPerforms: Ring<PerformStatus>
    var tasks: TaskQueue

    // MARK: what selectors and observers wrote

    var activity: Ring<ActivityRecord>
    var activitySeq: UInt64 = 0
    var logLines: Ring<String>
    var counters: [String: Int] = [:]

    // MARK: what the explainer keeps

    /// Closed turns, oldest first.
    var turns: Ring<TurnRecord>
    var load = LoadStats()
    var utilization: UtilizationWindow
    var busyLoop = false
    /// The turn under way began (monotonic), or the loop fell asleep.
    var turnSince: Double?
    var asleepSince: Double?
    /// Per mode: the last item whose removal could have emptied it.
    var lastRemoval: [String: Removal] = [:]
    /// Modes anything was ever added to (`common` for items in the common modes).
    var everFilled: Set<String> = []
    /// Per mode: when a run in it last began (monotonic).
    var modeEntered: [String: Double] = [:]
    /// A stop of the worker's end (thread ending or service stopping).
    var endOrigin: StopOrigin?

    // MARK: the loop budgets (depth, stack, CPU in nested runs)

    /// The thread's stack, lowest and highest address (0 until it starts).
    var stackLow: UInt = 0
    var stackHigh: UInt = 0
    /// The most stack in use (bytes) when a run began.
    var stackUsedMax = 0
    /// The deepest the thread's runs were nested (runs under way at once).
    var depthMax = 0
    /// The thread's CPU seconds when the nest under way began (its first
    /// nested run); nil while only the outermost run is under way.
    var nestCPUStart: Double?
    /// Past `Limits.maxNestCPUSeconds`: nested runs are stopped and refused
    /// until the loop sleeps in its outermost run or that run returns.
    var livelocked = false

    init(limits: Limits, diagnostics: DiagnosticsOptions, turnRingSize: Int? = nil) {
        turns = Ring(capacity: turnRingSize ?? diagnostics.turnRingSize)
        utilization = UtilizationWindow(window: diagnostics.busyWindow)
        // Liveness by the records' own atomic flags: these run under the lock.
        timers = RecordTable(limit: limits.maxTimersPerWorker, counts: { $0.spec.role == .user }) { $0.isLive }
        sources = RecordTable(limit: limits.maxSourcesPerWorker, counts: { $0.spec.role == .user }) { $0.isLive }
        observers = RecordTable(limit: limits.maxObserversPerWorker) { $0.isLive }
        tasks = TaskQueue(capacity: limits.taskCapacity)
        answeredPerforms = Ring(capacity: max(1, limits.performHistory))
        activity = Ring(capacity: limits.activityRingSize)
        logLines = Ring(capacity: limits.logRingSize)
    }

    /// Throws when the worker is ending or gone.
    func checkAlive(_ id: String) throws(RunLoopError) {
        if exited || closing || cancelled { throw Worker.exitedError(id) }
    }

    /// Something was added to the loop: a parked loop worker runs again. The
    /// caller notifies the lock's waiters after the closure. It must come after
    /// the CF call adding the item: a parked worker woken before the item is in
    /// the loop would find the mode still empty, get `finished` and park again
    /// with the new generation, never to see the item.
    mutating func touch() { generation &+= 1 }
}

/// The answer to whoever waits for a run's exit (a stop or a manual run).
typealias RunReply = @Sendable (Result<RunExit, RunLoopError>) -> Void

/// One run under way. `entered` turns true when CF notifies `entry`, i.e. once
/// the run's own stop flag exists: a stop asked before that is dropped, as
/// CF drops it, unless it asked to be kept (`atEntry`): then it waits in
/// `stopRequested` and is applied at entry.
struct RunFrame {
    var seq: Int
    var mode: String
    var entered = false
    var stopRequested = false
    /// Who asked this run to stop (from another thread).
    var stopOrigin: StopOrigin?
    var seconds: Double = 0
    var startedMono: Double = 0
    /// The run was asked to return after a handled source (`/why` answers
    /// for the run under way).
    var returnAfterSourceHandled = false
}

/// A run a manual worker was asked for.
struct ManualRun {
    var mode: RunLoopMode
    var seconds: Double
    var returnAfterSourceHandled: Bool
    var reply: RunReply
}

// @unchecked: its CF objects (the loop, the entry observer) are CF types that
// CF lets any thread hold and release; every other field is Sendable.
extension WorkerBook: @unchecked Sendable {}
