import ArgumentParser
import RunLoopCore
import RunLoopServer

/// What the explainer records and when it warns (docs/explain.md).
struct ExplainOptions: ParsableArguments {
    @Flag(
        inversion: .prefixedNo,
        help:
            "Record every loop's turns, callouts, utilisation and stalls (the explainer; on by default; env RUNLOOPD_TRACE=0 turns it off)."
    )
    var trace: Bool?

    @Option(help: "Turns kept per thread (GET /api/threads/{id}/turns; 1...100000).")
    var turnRingSize = Setting(Count(DiagnosticsOptions().turnRingSize), env: "TURN_RING_SIZE")

    @Option(
        help:
            "The most turns one thread may ask to keep (turnRingSize in POST /api/threads; turn-ring-size...100000).")
    var maxTurnRingSize = Setting(Count(DiagnosticsOptions().maxTurnRingSize), env: "MAX_TURN_RING_SIZE")

    @Option(help: "Callouts kept per turn (more are counted, not kept; 0...1024).")
    var maxCalloutsPerTurn = Setting(Count(DiagnosticsOptions().maxCalloutsPerTurn), env: "MAX_CALLOUTS_PER_TURN")

    @Option(help: "Stall thresholds in milliseconds: micro-hang,hang,severe (1 to 3, increasing).")
    var stallThresholds = Setting(StallThresholds(DiagnosticsOptions().stallThresholds), env: "STALL_THRESHOLDS")

    @Option(help: "How long a source signalled without a wake-up may wait on a sleeping loop before lost_wakeup.")
    var lostWakeupAfter = Setting(Seconds(DiagnosticsOptions().lostWakeupAfter), env: "LOST_WAKEUP_AFTER")

    @Option(help: "How long a perform may wait on a loop that is not running before perform_on_idle_loop.")
    var idlePerformAfter = Setting(Seconds(DiagnosticsOptions().idlePerformAfter), env: "IDLE_PERFORM_AFTER")

    @Option(help: "How long work may wait in a mode the thread does not run before mode_never_runs.")
    var modeNeverRunsAfter = Setting(Seconds(DiagnosticsOptions().modeNeverRunsAfter), env: "MODE_NEVER_RUNS_AFTER")

    @Option(help: "How long a run may last with nothing in its mode that can wake it before loop_cannot_wake.")
    var cannotWakeAfter = Setting(Seconds(DiagnosticsOptions().cannotWakeSeconds), env: "CANNOT_WAKE_AFTER")

    @Option(help: "Utilisation window (busy_loop needs it full).")
    var busyWindow = Setting(Seconds(DiagnosticsOptions().busyWindow), env: "BUSY_WINDOW")

    @Option(help: "Utilisation above this share of the window is a busy loop (0-1).")
    var busyThreshold = Setting(Number(DiagnosticsOptions().busyThreshold), env: "BUSY_THRESHOLD")

    @Option(help: "Warnings kept (the oldest inactive ones are forgotten first; 1...1000000).")
    var maxWarnings = Setting(Count(DiagnosticsOptions().maxWarnings), env: "MAX_WARNINGS")

    mutating func validate() throws {
        let environment = Environment.current
        if trace == nil { trace = try environment.toggle("TRACE") ?? true }
        try resolve(
            \.turnRingSize, \.maxTurnRingSize, \.maxCalloutsPerTurn, \.stallThresholds, \.lostWakeupAfter,
            \.idlePerformAfter, \.modeNeverRunsAfter, \.cannotWakeAfter, \.busyWindow, \.busyThreshold, \.maxWarnings)
        try turnRingSize.check("--turn-ring-size", 1...100_000, "1...100000")
        try maxTurnRingSize.check(
            "--max-turn-ring-size", turnRingSize.value...100_000, "--turn-ring-size (\(turnRingSize.count))...100000")
        try maxCalloutsPerTurn.check("--max-callouts-per-turn", 0...1024, "0...1024")
        try maxWarnings.check("--max-warnings", 1...1_000_000, "1...1000000")
        for (flag, setting) in [
            ("--lost-wakeup-after", lostWakeupAfter), ("--idle-perform-after", idlePerformAfter),
            ("--mode-never-runs-after", modeNeverRunsAfter), ("--busy-window", busyWindow),
        ] {
            try setting.check(flag, Seconds(0.001)...Seconds(86_400), "0.001 s...1d")
        }
        try cannotWakeAfter.check("--cannot-wake-after", Seconds(0.001)...Seconds(1e8), "0.001...1e8 seconds")
        try busyThreshold.check("--busy-threshold", Number(.leastNonzeroMagnitude)...Number(1), "in (0, 1]")
    }

    /// The explainer's options these flags give.
    var diagnostics: DiagnosticsOptions {
        var options = DiagnosticsOptions()
        options.tracing = trace ?? true
        options.turnRingSize = turnRingSize.count
        options.maxTurnRingSize = maxTurnRingSize.count
        options.maxCalloutsPerTurn = maxCalloutsPerTurn.count
        options.stallThresholds = stallThresholds.value.seconds
        options.lostWakeupAfter = lostWakeupAfter.seconds
        options.idlePerformAfter = idlePerformAfter.seconds
        options.modeNeverRunsAfter = modeNeverRunsAfter.seconds
        options.cannotWakeSeconds = cannotWakeAfter.seconds
        options.busyWindow = busyWindow.seconds
        options.busyThreshold = busyThreshold.number
        options.maxWarnings = maxWarnings.count
        return options
    }
}
