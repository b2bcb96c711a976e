/// A run with many turns left (a 1 ms repeating timer in a 300 s run): once
/// only repeating timers without a fire limit remain and nothing comes from
/// outside, their fires until the deadline are counted, not played.
extension RunSimulator {
    mutating func fastForward() -> Prediction {
        let timers = model.timers.filter { $0.valid && $0.modes.contains(mode) }
        let plain =
            stimuli.isEmpty && outerTimeouts.isEmpty && !timers.isEmpty
            && timers.allSatisfy { $0.interval != nil && $0.maxFires == nil }
            && !model.sources.contains { $0.valid && $0.modes.contains(mode) && ($0.signalled || $0.queued > 0) }
        guard plain else {
            return unknown(
                outOfBudget
                    ? "\(passes) pass\(passes == 1 ? "" : "es") played and more to come over \(model.itemCount) items: too long to play here, not played to the end"
                    : "more than \(Self.maxPasses) passes to play: not played to the end")
        }
        guard hasTimeout else {
            reasons.append(
                "repeating timers \(timers.map(\.id).joined(separator: ", ")) keep waking it and the run has no timeout: it does not return by itself"
            )
            return unknown(nil)
        }
        for timer in timers {
            guard let interval = timer.interval, timer.next < deadline else { continue }
            timerFires += Int(((deadline - timer.next) / interval).rounded(.up))
        }
        now = deadline
        reasons.append(
            "repeating timers \(timers.map(\.id).joined(separator: ", ")) fire until the deadline (counted, not played turn by turn)"
        )
        reasons.append(
            "the run's \(ExitCause.seconds(seconds)) deadline passes; timer fires never count as handled sources")
        turns.removeAll()
        var result = Prediction(
            mode: mode, seconds: seconds, returnAfterSourceHandled: returnAfterSourceHandled,
            outcome: .init(
                exitReason: .timedOut, cause: .deadline(seconds: seconds, timerFires: timerFires),
                atMs: (seconds * 1_000_000).rounded() / 1000),
            windowMs: nil, certain: races.isEmpty, race: nil, reasons: reasons, turns: [])
        result.turns = []
        return result
    }

    /// No exit predicted: the run goes on (or is too long to play).
    mutating func unknown(_ why: String?) -> Prediction {
        if let why {
            reasons.append(why)
            unsettled = true
        }
        return Prediction(
            mode: mode, seconds: seconds, returnAfterSourceHandled: returnAfterSourceHandled,
            outcome: .init(exitReason: nil, cause: nil, atMs: nil), windowMs: nil, certain: why == nil,
            race: nil, reasons: reasons, turns: [])
    }
}
