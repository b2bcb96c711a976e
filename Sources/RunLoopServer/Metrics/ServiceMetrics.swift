import CoreMetrics
import Metrics
import Foundation
import Primitives
import Prometheus
import RunLoopCore

/// runloopd's Prometheus metrics, recorded through swift-metrics into a
/// registry of this service's own (so several services in one process, as in
/// tests, never share counts). Served as text at `/metrics`.
///
/// Threads: recorded from any thread (workers' events, libmicrohttpd's
/// threads, the control loop); swift-metrics handles are thread-safe and the
/// per-route handle cache is one `Locked` (handles are made outside it).
final class ServiceMetrics: Sendable {
    let registry: PrometheusCollectorRegistry
    private let factory: PrometheusMetricsFactory
    private let timerFires: CoreMetrics.Counter
    private let timerLateness: CoreMetrics.Timer
    private let wakeupLatency: CoreMetrics.Timer
    private let commandsQueued: CoreMetrics.Gauge
    private let eventClients: CoreMetrics.Gauge
    /// Handles for the bounded label sets the engine reports many times a
    /// second (one per run exit, one per perform), made once.
    private let runExits: [ExitReason: CoreMetrics.Counter]
    private let performs: [String: CoreMetrics.Counter]
    private static let performOutcomes = ["ok", "deadline", "thread_ended", "cancelled", "failed"]
    /// One counter per wake-up cause (`WakeKind`), one histogram of turn busy time.
    private let wakeups: [WakeKind: CoreMetrics.Counter]
    private let turnBusy: CoreMetrics.Timer
    private let stalls: [String: CoreMetrics.Counter]

    init() {
        registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        let fine: [Duration] = [
            .microseconds(10), .microseconds(25), .microseconds(50), .microseconds(100), .microseconds(250),
            .microseconds(500), .milliseconds(1), .milliseconds(2.5), .milliseconds(5), .milliseconds(10),
            .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .seconds(1),
        ]
        factory.durationHistogramBuckets = [
            "runloopd_timer_lateness_seconds": fine,
            "runloopd_wakeup_latency_seconds": fine,
            "runloopd_turn_busy_seconds": fine + [.milliseconds(500), .seconds(2.5), .seconds(10)],
            "runloopd_http_request_duration_seconds": fine + [.seconds(2.5), .seconds(5), .seconds(10), .seconds(30)],
        ]
        self.factory = factory
        timerFires = CoreMetrics.Counter(label: "runloopd_timer_fires_total", factory: factory)
        timerLateness = CoreMetrics.Timer(label: "runloopd_timer_lateness_seconds", factory: factory)
        wakeupLatency = CoreMetrics.Timer(label: "runloopd_wakeup_latency_seconds", factory: factory)
        commandsQueued = CoreMetrics.Gauge(label: "runloopd_commands_queued", factory: factory)
        eventClients = CoreMetrics.Gauge(label: "runloopd_event_clients", factory: factory)
        var runExits: [ExitReason: CoreMetrics.Counter] = [:]
        for reason in ExitReason.allCases {
            let counter = CoreMetrics.Counter(
                label: "runloopd_run_exits_total", dimensions: [("reason", reason.name)], factory: factory)
            counter.increment(by: 0)
            runExits[reason] = counter
        }
        self.runExits = runExits
        var performs: [String: CoreMetrics.Counter] = [:]
        for outcome in Self.performOutcomes {
            performs[outcome] = CoreMetrics.Counter(
                label: "runloopd_performs_total", dimensions: [("outcome", outcome)], factory: factory)
        }
        self.performs = performs
        var wakeups: [WakeKind: CoreMetrics.Counter] = [:]
        for kind in WakeKind.allCases {
            let counter = CoreMetrics.Counter(
                label: "runloopd_wakeups_total", dimensions: [("cause", kind.rawValue)], factory: factory)
            counter.increment(by: 0)
            wakeups[kind] = counter
        }
        self.wakeups = wakeups
        turnBusy = CoreMetrics.Timer(label: "runloopd_turn_busy_seconds", factory: factory)
        var stalls: [String: CoreMetrics.Counter] = [:]
        for severity in DiagnosticsOptions.severities {
            let counter = CoreMetrics.Counter(
                label: "runloopd_stalls_total", dimensions: [("severity", severity)], factory: factory)
            counter.increment(by: 0)
            stalls[severity] = counter
        }
        self.stalls = stalls
    }

    /// Records what the engine reports.
    func record(_ event: RunLoopEvent) {
        switch event {
        case .runExit(_, let exit):
            runExits[exit.reason]?.increment()
        case .timer(_, _, _, let latenessMs, _):
            timerFires.increment()
            timerLateness.recordNanoseconds(Int64(latenessMs * 1_000_000))
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
            turnBusy.recordNanoseconds(Int64(turn.busyMs * 1_000_000))
        case .stallEnded(let stall):
            // Counted once, by the severity it ended with.
            stalls[stall.severity]?.increment()
        default:
            break
        }
    }

    /// A control-loop command went from signal + wake-up to its perform routine.
    func recordWakeup(seconds: Double) {
        wakeupLatency.recordNanoseconds(Int64(seconds * 1e9))
    }

    /// One HTTP request answered. The handles per route (a bounded set of
    /// templates) are made once and reused: this runs for every request.
    func recordRequest(route: String, status: Int, seconds: Double) {
        let key = RequestKey(route: route, status: status)
        let handles: (CoreMetrics.Counter, CoreMetrics.Timer)
        if let found = requestHandles.withLock({ $0[key] }) {
            handles = found
        } else {
            // Made after the lock: the factory takes the Prometheus registry's
            // own lock. Two requests may both make them; the first kept wins
            // (the registry hands both the same metric anyway).
            let made = (
                counter("runloopd_http_requests_total", [("route", route), ("status", String(status))]),
                CoreMetrics.Timer(
                    label: "runloopd_http_request_duration_seconds", dimensions: [("route", route)], factory: factory)
            )
            handles = requestHandles.withLock { cache in
                if let found = cache[key] { return found }
                cache[key] = made
                return made
            }
        }
        handles.0.increment()
        handles.1.recordNanoseconds(Int64(seconds * 1e9))
    }

    private struct RequestKey: Hashable {
        let route: String
        let status: Int
    }

    private let requestHandles = Locked<[RequestKey: (CoreMetrics.Counter, CoreMetrics.Timer)]>([:])

    /// A limit refused work.
    func recordRefusal(_ reason: String) {
        counter("runloopd_limit_refusals_total", [("reason", reason)]).increment()
    }

    private func counter(_ label: String, _ dimensions: [(String, String)]) -> CoreMetrics.Counter {
        CoreMetrics.Counter(label: label, dimensions: dimensions, factory: factory)
    }

    /// The text exposition, with gauges sampled now.
    /// Utilisation is reported as the mean and the maximum over live threads
    /// (`stat` label), never per thread: the label set stays bounded however
    /// many threads come and go. Active warnings are labelled by code only.
    /// The store's counters as last exported (counters only grow by the difference).
    private let storeReported = Locked((dropped: 0, written: 0))

    /// The history store's figures: `runloopd_store_dropped_total` (events a
    /// full queue dropped), `runloopd_store_written_total`,
    /// `runloopd_store_queue_depth`, `runloopd_store_up`.
    private func recordStore(_ status: HistoryRecorder.Status) {
        let (dropped, written) = storeReported.withLock { r in
            defer { r = (status.dropped, status.written) }
            return (max(0, status.dropped - r.dropped), max(0, status.written - r.written))
        }
        CoreMetrics.Counter(label: "runloopd_store_dropped_total", factory: factory).increment(by: dropped)
        CoreMetrics.Counter(label: "runloopd_store_written_total", factory: factory).increment(by: written)
        CoreMetrics.Gauge(label: "runloopd_store_queue_depth", factory: factory).record(Double(status.queued))
        CoreMetrics.Gauge(label: "runloopd_store_up", factory: factory).record(status.up ? 1 : 0)
    }

    func exposition(
        threads: [WorkerSnapshot], utilizations: [Double], warningsActive: [String: Int], queued: Int,
        eventClients clients: Int, store: HistoryRecorder.Status? = nil
    ) -> [UInt8] {
        if let store { recordStore(store) }
        let mean = utilizations.isEmpty ? 0 : utilizations.reduce(0, +) / Double(utilizations.count)
        for (stat, value) in [("mean", mean), ("max", utilizations.max() ?? 0)] {
            CoreMetrics.Gauge(label: "runloopd_loop_utilization", dimensions: [("stat", stat)], factory: factory)
                .record(value)
        }
        for code in WarningTable.codes {
            CoreMetrics.Gauge(label: "runloopd_warnings_active", dimensions: [("code", code)], factory: factory)
                .record(Double(warningsActive[code] ?? 0))
        }
        var byState: [WorkerState: Int] = [.running: 0, .waiting: 0, .idle: 0, .exited: 0]
        for thread in threads { byState[thread.state, default: 0] += 1 }
        for (state, count) in byState {
            CoreMetrics.Gauge(label: "runloopd_threads", dimensions: [("state", state.rawValue)], factory: factory)
                .record(Double(count))
        }
        commandsQueued.record(Double(queued + threads.reduce(0) { $0 + $1.pendingPerforms.count }))
        eventClients.record(Double(clients))
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        return buffer
    }
}
