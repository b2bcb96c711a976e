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
        // Asleep: the rest of the pass it sleeps in (CF's blocks after the
        // wake included), then on as from any pass.
        if at == .asleep, let end = sleepAndHandle(handled: false) { return end }
        if let why = stuck { return unknown(why) }
        return playPasses()
    }
}
