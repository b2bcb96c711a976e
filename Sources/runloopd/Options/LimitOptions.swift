import ArgumentParser
import RunLoopCore
import RunLoopServer

/// The engine's bounds (every field of `Limits` has its flag here) and the
/// longest wait a request may ask for.
struct LimitOptions: ParsableArguments {
    @Option(help: "Worker threads alive at once.")
    var maxThreads = Setting(Count(Limits().maxWorkers), env: "MAX_THREADS")

    @Option(help: "Timers per worker thread.")
    var maxTimers = Setting(Count(Limits().maxTimersPerWorker), env: "MAX_TIMERS")

    @Option(help: "Sources per worker thread.")
    var maxSources = Setting(Count(Limits().maxSourcesPerWorker), env: "MAX_SOURCES")

    @Option(help: "Observers per worker thread.")
    var maxObservers = Setting(Count(Limits().maxObserversPerWorker), env: "MAX_OBSERVERS")

    @Option(help: "Performs queued on one thread and not yet run.")
    var maxQueued = Setting(Count(Limits().maxQueuedCommands), env: "MAX_QUEUED")

    @Option(help: "Idle tasks per thread (the task queue's capacity).")
    var maxTasks = Setting(Count(Limits().taskCapacity), env: "MAX_TASKS")

    @Option(help: "Answered performs each thread remembers for GET /api/threads/{id}/performs/{pid} (1...1000000).")
    var performHistory = Setting(Count(Limits().performHistory), env: "PERFORM_HISTORY")

    @Option(help: "Entries kept in each thread's activity ring.")
    var activityRingSize = Setting(Count(Limits().activityRingSize), env: "ACTIVITY_RING_SIZE")

    @Option(help: "Lines kept in each thread's log.")
    var logRingSize = Setting(Count(Limits().logRingSize), env: "LOG_RING_SIZE")

    @Option(help: "Lateness samples kept per timer (for p50 and p99).")
    var latenessWindow = Setting(Count(Limits().latenessWindow), env: "LATENESS_WINDOW")

    @Option(help: "Messages kept (received) and queued (pending) per port source.")
    var portQueueSize = Setting(Count(Limits().portQueueSize), env: "PORT_QUEUE_SIZE")

    @Option(help: "Bytes of data in one port message.")
    var maxMessageBytes = Setting(Count(Limits().maxMessageBytes), env: "MAX_MESSAGE_BYTES")

    @Option(help: "Longest sleep selector, in milliseconds.")
    var maxSleepMs = Setting(Count(Limits().maxSleepMillis), env: "MAX_SLEEP_MS")

    @Option(help: "Longest spin selector, in microseconds.")
    var maxSpinUs = Setting(Count(Limits().maxSpinMicros), env: "MAX_SPIN_US")

    @Option(help: "Longest thread name, in UTF-8 bytes.")
    var maxNameLength = Setting(Count(Limits().maxNameLength), env: "MAX_NAME_LENGTH")

    @Option(help: "Exited threads remembered for GET after they end.")
    var retainedExitedThreads = Setting(Count(Limits().retainedExitedWorkers), env: "RETAINED_EXITED_THREADS")

    @Option(
        help:
            "Runs under way at once on one thread, nested (1...1024); a runNested past it is refused before it starts. Sizes worker stacks: 2 MiB + 64 KiB per level."
    )
    var maxNesting = Setting(Count(Limits().maxNesting), env: "MAX_NESTING")

    @Option(
        help:
            "CPU seconds a thread's nested runs may take back to back before it counts as livelocked (its nest is stopped, new nested runs refused until its loop sleeps)."
    )
    var maxNestCpu = Setting(Seconds(Limits().maxNestCPUSeconds), env: "MAX_NEST_CPU")

    @Option(
        help:
            "Item-steps one request's predictions may play (/predict, /why, on the predictions queue beside the control loop; 1000...100000000), and all requests together a second; past it the play is given up (exitReason null, not certain)."
    )
    var maxPredictSteps = Setting(Count(Limits().maxPredictSteps), env: "MAX_PREDICT_STEPS")

    @Option(help: "Largest seconds / interval / delay accepted (at most 1e8 s: CF waits forever past about 5e8 s).")
    var maxSeconds = Setting(Seconds(Limits().maxSeconds), env: "MAX_SECONDS")

    @Option(
        help:
            "Longest wait one request may ask for (perform timeout, manual run); also caps how long a stop (10 s) or an end (15 s) waits for a blocked loop."
    )
    var maxWait = Setting(Seconds(APILimits().maxWaitSeconds), env: "MAX_WAIT")

    /// Each count flag and the `Limits` field it sets.
    static var countFields: [(flag: WritableKeyPath<Self, Setting<Count>>, field: WritableKeyPath<Limits, Int>)] {
        [
            (\.maxThreads, \.maxWorkers), (\.maxTimers, \.maxTimersPerWorker), (\.maxSources, \.maxSourcesPerWorker),
            (\.maxObservers, \.maxObserversPerWorker), (\.maxQueued, \.maxQueuedCommands), (\.maxTasks, \.taskCapacity),
            (\.performHistory, \.performHistory), (\.activityRingSize, \.activityRingSize),
            (\.logRingSize, \.logRingSize), (\.latenessWindow, \.latenessWindow), (\.portQueueSize, \.portQueueSize),
            (\.maxMessageBytes, \.maxMessageBytes), (\.maxSleepMs, \.maxSleepMillis), (\.maxSpinUs, \.maxSpinMicros),
            (\.maxNameLength, \.maxNameLength), (\.retainedExitedThreads, \.retainedExitedWorkers),
            (\.maxNesting, \.maxNesting), (\.maxPredictSteps, \.maxPredictSteps),
        ]
    }

    mutating func validate() throws {
        for (flag, _) in Self.countFields { try self[keyPath: flag].resolve() }
        try resolve(\.maxSeconds, \.maxWait, \.maxNestCpu)
        for (flag, setting) in [
            ("--max-threads", maxThreads), ("--max-timers", maxTimers), ("--max-sources", maxSources),
            ("--max-observers", maxObservers), ("--max-queued", maxQueued), ("--max-tasks", maxTasks),
            ("--perform-history", performHistory), ("--activity-ring-size", activityRingSize),
            ("--log-ring-size", logRingSize), ("--lateness-window", latenessWindow),
            ("--port-queue-size", portQueueSize), ("--retained-exited-threads", retainedExitedThreads),
        ] {
            try setting.check(flag, 1...1_000_000, "1...1000000")
        }
        try maxMessageBytes.check("--max-message-bytes", 1...16_777_216, "1...16777216")
        try maxSleepMs.check("--max-sleep-ms", 1...86_400_000, "1...86400000 (a day)")
        try maxSpinUs.check("--max-spin-us", 1...86_400_000_000, "1...86400000000 (a day)")
        try maxNameLength.check("--max-name-length", 1...4096, "1...4096")
        try maxNesting.check("--max-nesting", 1...1024, "1...1024")
        try maxPredictSteps.check("--max-predict-steps", 1000...100_000_000, "1000...100000000")
        try maxNestCpu.check("--max-nest-cpu", Seconds(0.01)...Seconds(3600), "0.01...3600 seconds")
        try maxSeconds.check("--max-seconds", Seconds(0.001)...Seconds(1e8), "0.001...1e8 seconds")
        try maxWait.check("--max-wait", Seconds(0.001)...Seconds(1e8), "0.001...1e8 seconds")
    }

    /// The engine's bounds these flags give.
    var limits: Limits {
        var limits = Limits()
        for (flag, field) in Self.countFields { limits[keyPath: field] = self[keyPath: flag].count }
        limits.maxSeconds = maxSeconds.seconds
        limits.maxNestCPUSeconds = maxNestCpu.seconds
        return limits
    }

    /// The engine's and the waits' part of the configuration.
    func apply(to config: inout ServiceConfiguration) {
        config.limits = limits
        config.api.maxWaitSeconds = maxWait.seconds
        // No request waits longer than --max-wait, not even for a stop or an end.
        config.api.stopWaitSeconds = min(config.api.stopWaitSeconds, maxWait.seconds)
        config.api.endWaitSeconds = min(config.api.endWaitSeconds, maxWait.seconds)
    }
}
