import CoreFoundation
import Foundation
import Primitives

/// The explainer on a worker, its tracing half: turns and their callouts,
/// runs, busy callouts. It runs on the worker's own thread (observers,
/// callouts, runs).
extension Worker {
    // MARK: - Turns (worker's thread)

    /// Runs `body` as a callout of the loop: timed, filed under the turn under
    /// way, and watched for stalls while it runs.
    func callout<T>(_ ref: CalloutRef, _ body: () -> T) -> T {
        LockCheck.assertNoneHeld("a run-loop callout")
        guard let slot = watchSlot else {
            tracer.calloutBegan(ref, at: 0)
            defer { tracer.calloutEnded(at: 0) }
            return body()
        }
        let start = Monotonic.now()
        tracer.calloutBegan(ref, at: start)
        diagnostics.watchdog.begin(slot, ref, at: start)
        let result = body()
        let end = Monotonic.now()
        let stall = diagnostics.watchdog.end(slot, at: end)
        tracer.calloutEnded(at: end)
        if let stall { diagnostics.watchdog.ended(stall) }
        return result
    }

    /// A run begins: its first turn opens; a callout that started it (a
    /// nested run) stops being watched, since the loop turns again.
    func runBegins(seq: Int, mode: String, depth: Int, at now: Double, cannotWake: Bool) {
        if let slot = watchSlot, depth > 0, tracer.currentCallout != nil,
            let stall = diagnostics.watchdog.end(slot, at: now)
        {
            diagnostics.watchdog.ended(stall)
        }
        tracer.beginRun(seq: seq, mode: mode, depth: depth, at: watchSlot == nil ? 0 : now)
        if warned.load(ordering: .relaxed) > 0,
            openWarnings.withLock({ keys in keys.contains { $0.hasPrefix("mode_never_runs|") } })
        {
            let resolved = diagnostics.warnings.resolve(.modeNeverRuns, thread: id) {
                $0.details["mode"]?.string == mode
            }
            forget(resolved.map { Self.warningKey($0.code, $0.subjects) })
        }
        if cannotWake {
            let (seconds, port) = book.withLock { ($0.runStack.last?.seconds ?? 0, $0.keepAliveItem) }
            warn(
                .loopCannotWake, severity: "info", subjects: [mode],
                message: Self.cannotWakeMessage(thread: id, mode: mode, seconds: seconds, keepAlivePort: port),
                details: ["mode": .string(mode), "seconds": .number(seconds)])
        }
    }

    /// The run returned: its last turn closes; the callout that started it
    /// (a nested run) is watched again.
    func runEnds(reason: ExitReason, at now: Double) -> LoopTracer.RunSummary {
        var summary = tracer.endRun(reason: reason, at: watchSlot == nil ? 0 : now)
        if watchSlot == nil { summary.turn = nil }
        if let slot = watchSlot, let outer = tracer.currentCallout {
            diagnostics.watchdog.begin(slot, outer, at: now)
        }
        return summary
    }

    /// `afterWaiting` (first observer): a turn begins.
    func loopWoke() {
        let now = Monotonic.now()
        tracer.woke(at: now)
        book.withLock { b in
            b.asleepSince = nil
            b.turnSince = now
        }
    }

    /// `beforeWaiting` (last observer): the turn ends.
    func loopSleeps() {
        loopSleptInBudget()
        let now = Monotonic.now()
        guard let turn = tracer.sleeping(at: now) else { return }
        publish(turn, at: now, asleep: true)
    }

    /// Files a closed turn: ring, load sums, utilisation window; then the
    /// `turn` event, and `busy_loop` when utilisation crosses its threshold.
    func publish(_ turn: TurnRecord, at now: Double, asleep: Bool = false) {
        let delta = tracer.pending
        tracer.pending = LoadStats()
        let options = diagnostics.options
        let busy: (ratio: Double, changed: Bool)? = book.withLock { b in
            b.turns.append(turn)
            b.load.turns += 1
            b.load.busyMs += turn.busyMs
            b.load.sleptMs += turn.sleptMs
            b.load.dispatch.merge(delta.dispatch)
            b.load.timerLag.merge(delta.timerLag)
            b.load.performLag.merge(delta.performLag)
            b.load.wakeups[turn.wokeBy.kind, default: 0] += 1
            b.utilization.add(busyMs: turn.busyMs, sleptMs: turn.sleptMs, at: now)
            b.turnSince = nil
            b.asleepSince = asleep ? now : nil
            let (ratio, covered) = b.utilization.utilization(now: now)
            guard let ratio, covered >= options.busyWindow * 900 else { return nil }
            let isBusy = ratio > options.busyThreshold
            defer { b.busyLoop = isBusy }
            return (ratio, isBusy != b.busyLoop)
        }
        emit(.turn(thread: id, turn: turn))
        guard let busy, busy.changed else { return }
        if busy.ratio > options.busyThreshold {
            warn(
                .busyLoop, severity: "warning", subjects: [id],
                message:
                    "\(id) was busy \(Int((busy.ratio * 100).rounded())) % of the last \(ExitCause.seconds(options.busyWindow)): it hardly sleeps",
                details: ["utilization": .number((busy.ratio * 1000).rounded() / 1000)])
            later(options.busyWindow) { $0.recheckBusy() }
        } else {
            unwarn(.busyLoop, subject: id)
        }
    }

    /// What holds the loop now, in words (nil when no callout runs, or with
    /// tracing off): why a stop or a run's end has not come back.
    public func busyDescription() -> String? {
        guard let slot = watchSlot, let (callout, since) = diagnostics.watchdog.current(slot) else { return nil }
        let seconds = Monotonic.now() - since
        return "\(callout.kind.rawValue) \(callout.id)"
            + (callout.selector.map { " (selector \($0))" } ?? "")
            + " has been running on \(id) for \(ExitCause.seconds(seconds)); CF returns from the run only after it returns"
    }

    /// A busy loop that has since fallen asleep closes no turn until it wakes
    /// (a run may wait for the distant future): count the sleep under way and
    /// end `busy_loop` once the window is quiet; look again while it is not.
    func recheckBusy() {
        let options = diagnostics.options
        let now = Monotonic.now()
        let quiet: Bool? = book.withLock { b in
            guard b.busyLoop else { return nil }
            guard let asleep = b.asleepSince else { return false }
            let (ratio, _) = b.utilization.utilization(now: now, openSleptMs: (now - asleep) * 1000)
            guard let ratio, ratio <= options.busyThreshold else { return false }
            b.busyLoop = false
            return true
        }
        switch quiet {
        case true?: unwarn(.busyLoop, subject: id)
        case false?: later(options.busyWindow) { $0.recheckBusy() }
        case nil: break
        }
    }

    /// The `stop` selector ran on this thread (the innermost run's callout).
    func stopSelectorRan() {
        let own = book.withLock { $0.thread }
        guard let own, pthread_equal(pthread_self(), own) != 0 else { return }
        tracer.stopSelectorRan()
    }
}

extension Worker {
    /// `loop_cannot_wake` for a long run that only the keep-alive port holds
    /// open: nothing in the mode is due or will be, but the API can still
    /// reach the loop, the keep-alive port's messages included.
    static func cannotWakeMessage(thread id: String, mode: String, seconds: Double, keepAlivePort: String?) -> String {
        let port =
            keepAlivePort.map {
                "a message to its keep-alive port \($0) (POST /api/threads/\(id)/sources/\($0)/messages), "
            } ?? ""
        return
            "\(id) waits in \(mode) for \(ExitCause.seconds(seconds)) with nothing in the mode due or on its way: "
            + "only its keep-alive port holds the mode open, so only \(port)a stop, a wake-up, "
            + "a perform queued, or a timer added later (at its fire date) will wake it; "
            + "a source added later wakes it only once signalled with a wake-up"
    }
}
