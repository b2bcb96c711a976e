/// A run under way, played from now (`Worker.predictRunUnderWay`): its
/// entry is past (no `entry` callout, no empty-mode check at entry), and a
/// loop asleep now goes on from its sleep; a busy one from its next pass.
extension RunSimulator {
    /// Where the run under way is now.
    package enum UnderWay {
        /// Asleep in its mode (`CFRunLoopIsWaiting`).
        case asleep
        /// Inside a pass (a callout, an observer): played from its next pass.
        case busy
    }

    mutating func runUnderWay(_ at: UnderWay) -> Prediction {
        var prediction = playUnderWay(at)
        prediction.nested = nested
        return prediction
    }

    private mutating func playUnderWay(_ at: UnderWay) -> Prediction {
        entered = true
        turn = OpenTurn(wokeBy: nil, afterWake: at == .asleep)
        if at == .asleep, let end = resumeFromSleep() { return end }
        if let why = stuck { return unknown(why) }
        while true {
            if let end = pass() { return end }
            if let why = stuck { return unknown(why) }
            passes += 1
            budget.left -= 1 + model.itemCount
            if budget.left <= 0 { outOfBudget = true }
            if passes >= Self.maxPasses || outOfBudget { return fastForward() }
        }
    }

    /// The second half of the pass the loop sleeps in: what wakes it, what
    /// it handles, CF's checks at the end of the pass.
    private mutating func resumeFromSleep() -> Prediction? {
        let live = sleep()
        if case .never = live {
            reasons.append(asleepText(timeoutSpent: timeoutSpent))
            return Prediction(
                mode: mode, seconds: seconds, returnAfterSourceHandled: returnAfterSourceHandled,
                outcome: .init(exitReason: nil, cause: nil, atMs: nil), windowMs: nil, certain: races.isEmpty,
                race: nil, reasons: reasons, turns: turns)
        }
        openTurn()
        ignoringWakeUps = true
        notify(.afterWaiting)
        var handled = false
        switch live {
        case .timer: doTimers()
        case .port(let index): handled = doSource1(index)
        case .wakeUp: wakeSince = nil
        case .never: break
        }
        return endOfPass(handled: handled)
    }
}
