/// A callout that runs the loop again (`runNested`): CF gives the nested
/// run a per-run record of its own (its stop flag, its ignored wake-ups),
/// while the loop's items, their timer descriptors, the wake-up
/// descriptor and what comes from outside are the same loop's.
extension RunSimulator {
    /// Plays the nested run `run` started by the callout `ref` now; the
    /// outer run goes on when it returns (or is stuck if it never does).
    mutating func playNested(_ run: LoopModel.NestedRun, from ref: CalloutRef) {
        guard stuck == nil else { return }
        guard depth < Self.maxNesting else {
            stuck = "runs nested more than \(Self.maxNesting) deep: not played"
            return
        }
        var inner = RunSimulator(
            model: model, mode: run.mode, seconds: run.seconds, returnAfterSourceHandled: run.returnAfterSourceHandled,
            stimuli: stimuli, margin: margin, start: now, depth: depth + 1)
        inner.carriers = carriers
        inner.wakeSince = wakeSince
        inner.wakeByLoop = wakeByLoop
        inner.portSince = portSince
        inner.fds = fds
        (inner.armedAt, inner.sequence, inner.wakeSequence) = (armedAt, sequence, wakeSequence)
        inner.lastRemoval = lastRemoval
        inner.budget = budget
        inner.flip = flip
        inner.races = races
        // Every enclosing run's timeout, as it comes, wakes the innermost run.
        inner.outerTimeouts = (outerTimeouts + (hasTimeout ? [deadline] : [])).filter { $0 > now }.sorted()
        // CF's new per-run record (`__CFRunLoopPushPerRunData`) starts
        // with wake-ups not ignored: a stop an entry observer makes in the
        // nested run wakes the loop, and the outer run, once it goes back
        // to sleep, wakes for it at once (plain CF shows that turn).
        inner.ignoringWakeUps = false
        var result = inner.run()

        model = inner.model
        carriers = inner.carriers
        wakeSince = inner.wakeSince
        wakeByLoop = inner.wakeByLoop
        portSince = inner.portSince
        fds = inner.fds
        (armedAt, sequence, wakeSequence) = (inner.armedAt, inner.sequence, inner.wakeSequence)
        lastRemoval = inner.lastRemoval
        stimuli = inner.stimuli
        races = inner.races
        outOfBudget = outOfBudget || inner.outOfBudget
        outerTimeouts.removeAll { $0 <= inner.now + 1e-9 }
        if hasTimeout && deadline <= inner.now + 1e-9 { timeoutSpent = true }
        nested.append(contentsOf: result.nested)
        result.nested = []
        nested.append(result)
        let what = "\(ref.kind.rawValue) \(ref.id)'s runNested (\(run.mode), \(ExitCause.seconds(run.seconds)))"
        guard let reason = result.exitReason, inner.stuck == nil, !inner.outOfBudget else {
            stuck =
                inner.stuck
                ?? "\(what) does not return by itself (\(result.reasons.last ?? "it sleeps on")), so neither does this run"
            return
        }
        now = inner.now
        reasons.append(
            "\(what) returns \(reason.name) (\(result.cause?.code ?? "-")) after \(Int((result.atMs ?? 0).rounded())) ms; the outer run goes on from there"
        )
    }
}
