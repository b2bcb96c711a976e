extension RunSimulator {
    /// The sentence for a run that sleeps with nothing due, signalled or
    /// holding a message, made from what the mode holds: what the API can
    /// still reach to wake it (a message to any of its ports, the keep-alive
    /// port included; a signal with a wake-up of any of its custom sources)
    /// is named, and "nothing can wake" is said only when there is none.
    func asleepText(timeoutSpent: Bool) -> String {
        let here = model.sources.filter { $0.valid && $0.modes.contains(mode) }
        var wakers: [String] = []
        let ports = here.filter(\.port)
        if !ports.isEmpty {
            let names = ports.map { $0.role == .keepAlive ? "\($0.id) (its keep-alive port)" : $0.id }
            wakers.append("a message to port \(names.joined(separator: ", "))")
        }
        let customs = here.filter { !$0.port }
        if !customs.isEmpty {
            wakers.append("a signal with a wake-up of \(customs.map(\.id).joined(separator: ", "))")
        }
        let others = "a stop, a wake-up, a perform queued or a timer added"
        // What the run did before this sleep (a queued message handled):
        // "nothing ... holding a message" is said of the loop after it.
        var ran: [String] = []
        for ref in turns.flatMap(\.callouts) where ref.kind != .observer {
            let name = "\(ref.kind.rawValue) \(ref.id)"
            if !ran.contains(name) { ran.append(name) }
        }
        let once =
            ran.isEmpty
            ? ""
            : "once \(ran.prefix(3).joined(separator: ", "))\(ran.count > 3 ? " and \(ran.count - 3) more" : "") "
                + "ran, "
        let until = wakers.isEmpty ? others : (wakers + [others]).joined(separator: ", ")
        if timeoutSpent {
            return
                "its timeout's wake-up came while a nested run ran and woke that run instead (CF's timeout is a one-shot dispatch timer), and nothing in \(mode) is due: "
                + "it sleeps past its deadline until \(until)"
        }
        guard !wakers.isEmpty else {
            return once
                + "nothing left in \(mode) can wake the loop and the run has no timeout: it sleeps until \(others)"
        }
        return once
            + "nothing in \(mode) is due, signalled or holding a message, and the run has no timeout: it sleeps until \(until)"
    }
}
