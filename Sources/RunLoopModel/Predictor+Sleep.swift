/// How the loop sleeps and what wakes it: epoll's ready list as CF uses
/// it (edge-triggered, one descriptor handed back per wait), the timer
/// descriptors' arming, and the races between what is ready at once.
extension RunSimulator {
    /// What a poll (epoll with no wait) finds ready now: epoll hands CF one
    /// descriptor, the one ready longest (its ready list is first in,
    /// first out).
    mutating func readyNow() -> Live? {
        applyStimuli(upTo: now)
        while let outer = outerTimeouts.first, outer <= now + 1e-9 {
            outerTimeouts.removeFirst()
            wake()
        }
        // Each readable descriptor at its place on the list; `byLoop`: it
        // was made readable by the loop's own thread, after all that was
        // ready at that moment.
        var ready: [(since: Double, sequence: Int, byLoop: Bool, what: String, live: Live)] = []
        if let due = armed, due <= now + 1e-9 {
            let place = armedAt[mode] ?? Place(since: due, sequence: 0)
            ready.append((place.since, place.sequence, place.sequence > 0, "the timer descriptor", .timer))
        }
        for (index, source) in model.sources.enumerated()
        where source.valid && source.port && source.queued > 0 && source.modes.contains(mode) {
            ready.append((portSince[index] ?? now, 0, false, "port \(source.id)'s message", .port(index)))
        }
        if let since = wakeSince {
            let place = Place(since: since + (wakeByLoop ? 1e-7 : 0), sequence: wakeSequence)
            ready.append((place.since, place.sequence, wakeByLoop, "a wake-up", .wakeUp(timeout: false)))
        }
        ready.sort { ($0.since, $0.sequence) < ($1.since, $1.sequence) }
        // Readiness that began before the loop was read (a message sent, a
        // timer due) is a fact with its time, not a plan: its order is known.
        // One before the read and one after it: the first was first.
        let known = ready.count > 1 && ready[0].since < 0
        let afterCallout = ready.count > 1 && ready[1].byLoop
        if ready.count > 1 && !(known && ready[1].since >= 0) && !afterCallout
            && ready[1].since - ready[0].since < (known ? 0.0002 : margin)
        {
            if decide("\(ready[0].what) and \(ready[1].what) are ready at once: epoll hands CF one of them per pass") {
                return ready[1].live
            }
        }
        return ready.first?.live
    }

    /// Sleeps until one descriptor is ready; applies the stimuli that come
    /// meanwhile.
    mutating func sleep() -> Live {
        while true {
            if let live = readyNow() { return live }
            var candidates: [(at: Double, what: String)] = []
            if let due = armed { candidates.append((max(due, now), "timer")) }
            if hasTimeout && !timeoutSpent { candidates.append((max(deadline, now), "timeout")) }
            if let next = stimuli.first { candidates.append((max(next.at, now), "stimulus")) }
            if let outer = outerTimeouts.first { candidates.append((max(outer, now), "an outer run's timeout")) }
            guard var first = candidates.min(by: { $0.at < $1.at }) else { return .never }
            let close = candidates.filter { $0.at - first.at < margin && $0.what != first.what }
            if !close.isEmpty {
                let said = ([first] + close).map { Self.said($0.what) }
                if decide(
                    "\(said.joined(separator: " and ")) fall within \(Int(margin * 1000)) ms of each other at \(Int(first.at * 1000)) ms: which comes first is timing"
                ) {
                    first = close[0]
                }
            }
            now = first.at
            switch first.what {
            case "timer": return .timer
            case "timeout":
                reasons.append("nothing wakes the loop before the run's timeout")
                return .wakeUp(timeout: true)
            case "stimulus": applyStimuli(upTo: now)
            default: continue  // an outer timeout: `readyNow` delivers it
            }
        }
    }

    /// The earliest fire date of `mode`'s timers (one inside its callout
    /// does not count).
    func nextFire(in mode: String) -> Double? {
        model.timers.filter { $0.valid && !$0.firing && $0.modes.contains(mode) }.map(\.next).min()
    }

    /// `__CFArmNextTimerInMode` for each of `modes`: its timerfd is armed at
    /// its earliest timer; with none left it keeps what it had (CF on Linux
    /// never disarms it), or stays quiet once read.
    /// `byLoop`: armed on the loop's thread (a timer's fire), not by a
    /// change from outside.
    mutating func armNext(in modes: Set<String>, byLoop: Bool = true) {
        for name in modes {
            if let next = nextFire(in: name) { arm(name, at: next, byLoop: byLoop) }
        }
    }

    /// `timerfd_settime` on `name`'s timerfd: a date already past makes it
    /// readable now, where it joins epoll's ready list; one readable before
    /// keeps its place (edge-triggered: no new edge).
    mutating func arm(_ name: String, at date: Double, byLoop: Bool) {
        let before = fds[name]
        fds[name] = date
        if let before, before <= now + 1e-9 {
            if date > now + 1e-9 {
                armedAt[name] = nil
            } else if armedAt[name] == nil {
                armedAt[name] = Place(since: before, sequence: 0)
            }
            return
        }
        if date <= now + 1e-9 {
            sequence += 1
            armedAt[name] = Place(since: now + (byLoop ? 1e-7 : 0), sequence: byLoop ? sequence : 0)
        } else {
            armedAt[name] = nil
        }
    }

    /// A sleep's candidate, as a race's why says it.
    static func said(_ what: String) -> String {
        switch what {
        case "timer": return "the mode's next timer"
        case "timeout": return "the run's timeout"
        case "stimulus": return "the next thing from outside"
        default: return what
        }
    }

    /// A race decision, `why` in words (`races[n]` says decision n):
    /// whether to take the other way this time.
    mutating func decide(_ why: String) -> Bool {
        races.append(why)
        return flip == races.count - 1
    }
}
