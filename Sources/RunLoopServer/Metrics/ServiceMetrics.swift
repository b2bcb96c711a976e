import Foundation
import MicroHTTP
import Primitives
import RunLoopCore

/// runloopd's Prometheus metrics, one set per service (several services in
/// one process, as in tests, never share counts). Served as text at
/// `/metrics` by the conventions: every family with `# HELP` and `# TYPE`,
/// in one fixed order; every counter with a known label set present from the
/// start at 0; units in the names (`_seconds`, `_bytes`, `_ratio`, `_total`);
/// one set of latency buckets for every histogram.
///
/// Threads: recorded from any thread (workers' events, libmicrohttpd's
/// threads, the control loop): counters are atomics, each histogram and the
/// per-route tables one `Locked`, held only to add a number.
final class ServiceMetrics: Sendable {
    /// The upper bounds (seconds) of every latency histogram: 10 µs to 10 s.
    static let latencyBuckets: [Double] = [
        0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
        0.5, 1, 2.5, 5, 10,
    ]
    static let performOutcomes = ["ok", "deadline", "thread_ended", "cancelled", "failed"]
    /// The refusal reasons known in advance (each present from the start at 0):
    /// the limits' 429 codes, then the 503s; docs/metrics.md lists them
    /// (`RefusalReasonTests`, both ways). Others are added when first seen.
    static let refusalReasons: [ErrorCode] = [
        .tooManyThreads, .tooManyTimers, .tooManySources, .tooManyObservers, .tooManyClients, .tooManyClientsPerIP,
        .queueFull, .threadCreateFailed, .noDescriptors, .overloaded, .notReady, .shuttingDown, .storeUnavailable,
        .nestingLimit, .livelock,
    ]
    static let threadStates: [WorkerState] = [.running, .waiting, .idle, .exited]

    /// The fleet's health, read from the store when scraped.
    let fleet = FleetHealth()
    /// When this service was made (seconds since the epoch).
    let startTime = Date().timeIntervalSince1970
    private let timerFires = Counter()
    private let timerLateness = Histogram(bounds: latencyBuckets)
    private let wakeupLatency = Histogram(bounds: latencyBuckets)
    private let turnBusy = Histogram(bounds: latencyBuckets)
    private let runExits = Dictionary(uniqueKeysWithValues: ExitReason.allCases.map { ($0, Counter()) })
    private let performs = Dictionary(uniqueKeysWithValues: performOutcomes.map { ($0, Counter()) })
    private let wakeups = Dictionary(uniqueKeysWithValues: WakeKind.allCases.map { ($0, Counter()) })
    private let stalls = Dictionary(uniqueKeysWithValues: DiagnosticsOptions.severities.map { ($0, Counter()) })
    private let refusals = Locked(Dictionary(uniqueKeysWithValues: refusalReasons.map { ($0.rawValue, Counter()) }))
    /// The answers by route and status and their durations by route: one
    /// lock per answer (its count and its duration together).
    private let answered = Locked(AnsweredTable())

    private struct AnsweredTable {
        var counts: [RequestKey: Int] = [:]
        var durations: [String: Histogram.Snapshot] = [:]
    }

    private struct RequestKey: Hashable, Comparable {
        let route: String
        let status: Int
        static func < (a: Self, b: Self) -> Bool { (a.route, a.status) < (b.route, b.status) }
    }

    /// Records what the engine reports.
    func record(_ event: RunLoopEvent) {
        switch event {
        case .runExit(_, let exit):
            runExits[exit.reason]?.increment()
        case .timer(_, _, _, let latenessMs, _):
            timerFires.increment()
            timerLateness.observe(latenessMs / 1000)
        case .perform(_, let result):
            let outcome: String
            switch result.outcome {
            case .success: outcome = "ok"
            case .failure(let error):
                switch error.kind {
                case .deadline: outcome = "deadline"
                case .gone: outcome = "thread_ended"
                case .conflict: outcome = "cancelled"
                default: outcome = "failed"
                }
            }
            performs[outcome]?.increment()
        case .turn(_, let turn):
            wakeups[turn.wokeBy.kind]?.increment()
            turnBusy.observe(turn.busyMs / 1000)
        case .stallEnded(let stall):
            // Counted once, by the severity it ended with.
            stalls[stall.severity]?.increment()
        default:
            break
        }
    }

    /// A control-loop command went from signal + wake-up to its perform routine.
    func recordWakeup(seconds: Double) {
        wakeupLatency.observe(seconds)
    }

    /// One HTTP request answered (routes are a bounded set of templates).
    func recordRequest(route: String, status: Int, seconds: Double) {
        answered.withLock { table in
            table.counts[RequestKey(route: route, status: status), default: 0] += 1
            table.durations[route, default: Histogram.Snapshot(bounds: Self.latencyBuckets)].add(seconds)
        }
    }

    /// A request refused by a limit (429) or an unavailable service (503).
    func recordRefusal(_ reason: String) {
        Self.handle(in: refusals, reason, make: Counter.init).increment()
    }

    /// The table's entry for `key`, made (outside the lock) and stored when
    /// missing; when two threads make one at once, the first stored wins.
    private static func handle<Key: Hashable, Handle: Sendable>(
        in table: Locked<[Key: Handle]>, _ key: Key, make: () -> Handle
    ) -> Handle {
        if let found = table.withLock({ $0[key] }) { return found }
        let made = make()
        return table.withLock { entries in
            if let found = entries[key] { return found }
            entries[key] = made
            return made
        }
    }

    /// The text exposition: every family, in this order, each time.
    func exposition(_ s: Sample) -> [UInt8] {
        var out = Exposition()
        out.family("runloopd_build_info", .gauge, "Always 1; the labels name the build and its history store.")
        out.sample("runloopd_build_info", [("version", s.version), ("store", s.storeKind)], 1)
        out.single(
            "runloopd_start_time_seconds", .gauge, "When this runloopd started, in seconds since the epoch.", startTime)

        writeRequests(&out, s)
        writeService(&out, s)
        writeLoops(&out, s)
        writeCallouts(&out, s)
        Self.writeStore(&out, s)
        Self.writeProcess(&out)
        return out.bytes
    }

    /// The HTTP requests answered and refused, by route.
    private func writeRequests(_ out: inout Exposition, _ s: Sample) {
        out.family(
            "runloopd_http_requests_total", .counter, "HTTP requests answered, by route template and status.")
        let table = answered.withLock { $0 }
        for (key, count) in table.counts.sorted(by: { $0.key < $1.key }) {
            out.sample(
                "runloopd_http_requests_total", [("route", key.route), ("status", String(key.status))],
                Double(count))
        }
        out.family(
            "runloopd_http_request_duration_seconds", .histogram,
            "Time from a request's arrival to its answer, by route template.")
        for (route, snapshot) in table.durations.sorted(by: { $0.key < $1.key }) {
            out.histogram("runloopd_http_request_duration_seconds", [("route", route)], snapshot)
        }
        out.family(
            "runloopd_limit_refusals_total", .counter,
            "Requests refused by a limit (429) or while unavailable (503), by error code.")
        for (reason, counter) in refusals.withLock({ $0 }).sorted(by: { $0.key < $1.key }) {
            out.sample("runloopd_limit_refusals_total", [("reason", reason)], Double(counter.value))
        }
    }

    /// The control loop's queue and wake-ups, the event-stream clients.
    private func writeService(_ out: inout Exposition, _ s: Sample) {
        out.family(
            "runloopd_commands_queued", .gauge,
            "Commands waiting: requests queued for the control loop plus performs queued on threads.")
        out.sample(
            "runloopd_commands_queued", [], Double(s.queued + s.threads.reduce(0) { $0 + $1.pendingPerforms.count }))
        out.single(
            "runloopd_event_clients", .gauge, "Connected event-stream (/api/events) clients.", Double(s.eventClients))
        out.single(
            "runloopd_event_clients_dropped_total", .counter,
            "Event-stream clients dropped for reading too slowly (--event-stream-buffer).",
            Double(s.eventClientsDropped))
        Self.writeConnections(&out, s.connections ?? HTTPConnectionCounts())
        out.family(
            "runloopd_wakeup_latency_seconds", .histogram,
            "From a control-loop command's signal to its perform routine running.")
        out.histogram("runloopd_wakeup_latency_seconds", [], wakeupLatency.snapshot)
    }

    /// The HTTP layer's budgets: connections open and pending, and those it closed.
    private static func writeConnections(_ out: inout Exposition, _ c: HTTPConnectionCounts) {
        out.single("runloopd_http_connections", .gauge, "HTTP connections open now.", Double(c.open))
        out.single(
            "runloopd_http_connections_pending", .gauge,
            "HTTP connections reading a request or idle between requests (under --request-deadline).", Double(c.pending)
        )
        out.family(
            "runloopd_http_connections_closed_total", .counter,
            "HTTP connections closed by a budget: deadline (--request-deadline), pending_cap "
                + "(--max-pending-requests), headroom (--connection-headroom), bad_framing (400, RFC 9112).")
        for (reason, count) in [
            ("bad_framing", c.badFraming), ("deadline", c.expired), ("headroom", c.crowded),
            ("pending_cap", c.evicted),
        ] {
            out.sample("runloopd_http_connections_closed_total", [("reason", reason)], Double(count))
        }
        out.single(
            "runloopd_event_clients_hung_up_total", .counter,
            "Event streams ended at once because their client closed its connection.", Double(c.streamsHungUp))
        out.single(
            "runloopd_http_answer_bytes_held", .gauge,
            "Bytes of queued answers (over 64 KiB each) their clients have not taken yet (--max-held-answer-bytes).",
            Double(c.heldAnswerBytes))
        out.single(
            "runloopd_http_answers_over_budget_total", .counter,
            "Answers replaced by 503 answers_over_budget: they would have passed --max-held-answer-bytes.",
            Double(c.answersOverBudget))
    }

    /// The worker threads and their loops' runs and turns.
    private func writeLoops(_ out: inout Exposition, _ s: Sample) {
        out.family("runloopd_threads", .gauge, "Worker threads by state.")
        var byState: [WorkerState: Int] = [:]
        for thread in s.threads { byState[thread.state, default: 0] += 1 }
        for state in Self.threadStates {
            out.sample("runloopd_threads", [("state", state.rawValue)], Double(byState[state] ?? 0))
        }
        out.family(
            "runloopd_loop_utilization_ratio", .gauge,
            "Busy share (0 to 1) of live run loops' recent turns: mean and max over threads.")
        let mean = s.utilizations.isEmpty ? 0 : s.utilizations.reduce(0, +) / Double(s.utilizations.count)
        out.sample("runloopd_loop_utilization_ratio", [("stat", "mean")], mean)
        out.sample("runloopd_loop_utilization_ratio", [("stat", "max")], s.utilizations.max() ?? 0)
        out.family("runloopd_run_exits_total", .counter, "Run-loop runs ended, by exit reason.")
        for reason in ExitReason.allCases {
            out.sample("runloopd_run_exits_total", [("reason", reason.name)], Double(runExits[reason]?.value ?? 0))
        }
        out.family("runloopd_wakeups_total", .counter, "Run-loop turns, by what woke the loop.")
        for kind in WakeKind.allCases {
            out.sample("runloopd_wakeups_total", [("cause", kind.rawValue)], Double(wakeups[kind]?.value ?? 0))
        }
        out.family("runloopd_turn_busy_seconds", .histogram, "Busy time of one run-loop turn (wake to sleep).")
        out.histogram("runloopd_turn_busy_seconds", [], turnBusy.snapshot)
        Self.writeLoopBudgets(&out, s)
    }

    /// The loop budgets: nesting depth, stack, nested runs refused, livelocks.
    private static func writeLoopBudgets(_ out: inout Exposition, _ s: Sample) {
        let live = s.threads.filter { $0.state != .exited }
        out.family(
            "runloopd_nesting_depth", .gauge,
            "Runs under way at once on one thread: the deepest now (max), the deepest ever seen (peak), the budget (limit, --max-nesting)."
        )
        out.sample("runloopd_nesting_depth", [("stat", "max")], Double(live.map(\.depth).max() ?? 0))
        out.sample("runloopd_nesting_depth", [("stat", "peak")], Double(live.map(\.depthMax).max() ?? 0))
        out.sample("runloopd_nesting_depth", [("stat", "limit")], Double(s.maxNesting))
        out.family(
            "runloopd_thread_stack_bytes", .gauge,
            "Worker thread stacks: the most any live thread had in use when a run began (used), and the size each is made with (size)."
        )
        out.sample("runloopd_thread_stack_bytes", [("stat", "used")], Double(live.map(\.stackUsedBytes).max() ?? 0))
        out.sample("runloopd_thread_stack_bytes", [("stat", "size")], Double(live.map(\.stackBytes).max() ?? 0))
        out.family(
            "runloopd_nested_runs_refused_total", .counter,
            "Nested runs refused before they started, by reason (depth, stack, livelock, ending).")
        for reason in LoopDiagnostics.nestRefusalReasons {
            out.sample(
                "runloopd_nested_runs_refused_total", [("reason", reason)], Double(s.nestedRunsRefused[reason] ?? 0))
        }
        out.single(
            "runloopd_livelocks_total", .counter, "Threads found livelocked (CPU in nested runs past --max-nest-cpu).",
            Double(s.livelocks))
        out.single(
            "runloopd_threads_livelocked", .gauge, "Worker threads livelocked now.",
            Double(live.filter(\.livelocked).count))
        out.single(
            "runloopd_predict_steps_total", .counter,
            "Item-steps the predictor played for requests (/predict, /why), each bounded by --max-predict-steps.",
            Double(s.predictSteps))
        out.single(
            "runloopd_predict_given_up_total", .counter,
            "Predictions given up because their request's --max-predict-steps ran out.", Double(s.predictionsGivenUp))
        out.family(
            "runloopd_offload_queued", .gauge,
            "Requests waiting or running on a queue beside the control loop "
                + "(predict: /predict and /why; export: journal exports).")
        for (queue, count) in s.offloadQueued {
            out.sample("runloopd_offload_queued", [("queue", queue)], Double(count))
        }
        out.single(
            "runloopd_journal_entries", .gauge, "State-changing requests the journal holds (GET /api/journal).",
            Double(s.journal.entries))
        out.family(
            "runloopd_journal_bytes", .gauge,
            "Bytes of request bodies and answers the journal holds (held), and its budget (limit, --journal-bytes).")
        out.sample("runloopd_journal_bytes", [("stat", "held")], Double(s.journal.bytes))
        out.sample("runloopd_journal_bytes", [("stat", "limit")], Double(s.journalLimit))
        out.single(
            "runloopd_journal_dropped_total", .counter,
            "Journal entries dropped to make room (--journal-size or --journal-bytes).", Double(s.journal.dropped))
    }

    /// Timers, performs, stalls and warnings.
    private func writeCallouts(_ out: inout Exposition, _ s: Sample) {
        out.single("runloopd_timer_fires_total", .counter, "Timer callbacks run.", Double(timerFires.value))
        out.family(
            "runloopd_timer_lateness_seconds", .histogram, "How late a timer fired after its scheduled fire date.")
        out.histogram("runloopd_timer_lateness_seconds", [], timerLateness.snapshot)
        out.family("runloopd_performs_total", .counter, "Performs answered, by outcome.")
        for outcome in Self.performOutcomes {
            out.sample("runloopd_performs_total", [("outcome", outcome)], Double(performs[outcome]?.value ?? 0))
        }
        out.family("runloopd_stalls_total", .counter, "Stalls (turns busy past a threshold) ended, by severity.")
        for severity in DiagnosticsOptions.severities {
            out.sample("runloopd_stalls_total", [("severity", severity)], Double(stalls[severity]?.value ?? 0))
        }
        out.family("runloopd_warnings_active", .gauge, "Diagnostic warnings active now, by code.")
        for code in WarningCode.allCases.map(\.rawValue) {
            out.sample("runloopd_warnings_active", [("code", code)], Double(s.warningsActive[code] ?? 0))
        }
    }

    /// The history store and the fleet sharing it (nothing without a store).
    private static func writeStore(_ out: inout Exposition, _ s: Sample) {
        if let store = s.store {
            out.single("runloopd_store_up", .gauge, "1 while the history store answers, else 0.", store.up ? 1 : 0)
            out.single(
                "runloopd_store_queue_depth", .gauge, "Events queued for the history store's writer.",
                Double(store.queued))
            out.single(
                "runloopd_store_written_total", .counter, "Events written to the history store.", Double(store.written))
            out.single(
                "runloopd_store_dropped_total", .counter, "Events dropped because the store's queue was full.",
                Double(store.dropped))
            out.single(
                "runloopd_store_pruned_total", .counter, "Stored events removed by retention.", Double(store.pruned))
            out.single(
                "runloopd_store_queue_bytes", .gauge,
                "Bytes of event text queued for the history store's writer (bounded by --store-queue-bytes).",
                Double(store.queuedBytes))
            out.single(
                "runloopd_store_cut_total", .counter,
                "Events whose stored text was cut to --store-event-bytes (kept with a marker).", Double(store.cut))
            if let disk = store.diskBytes {
                out.single(
                    "runloopd_store_disk_bytes", .gauge,
                    "The SQLite history file and its WAL on disk (bounded by --retention-size).", Double(disk))
            }
        }
        if s.store != nil {
            out.family(
                "runloopd_fleet_instances", .gauge,
                "Instances sharing this history store, by health (up, stopped, lost), as last read from the store.")
            // No samples until the store has answered once: unknown is not 0.
            for state in FleetHealth.states {
                if let count = s.fleet?[state] {
                    out.sample("runloopd_fleet_instances", [("state", state)], Double(count))
                }
            }
        }
    }

    /// The process: CPU, memory, descriptors, start time.
    private static func writeProcess(_ out: inout Exposition) {
        if let process = ProcessMetrics.read() {
            out.single(
                "process_cpu_seconds_total", .counter, "Total user and system CPU time spent in seconds.",
                process.cpuSeconds)
            out.single("process_resident_memory_bytes", .gauge, "Resident memory size in bytes.", process.residentBytes)
            out.single("process_virtual_memory_bytes", .gauge, "Virtual memory size in bytes.", process.virtualBytes)
            out.single("process_open_fds", .gauge, "Number of open file descriptors.", process.openFDs)
            out.single("process_max_fds", .gauge, "Maximum number of open file descriptors.", process.maxFDs)
            out.single(
                "process_start_time_seconds", .gauge, "Start time of the process since unix epoch in seconds.",
                process.startTimeSeconds)
        }
    }
}
