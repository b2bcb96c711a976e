import Foundation
import RunLoopTestSupport
@testable import RunLoopCore

/// The generator's widened set-ups (issue 38): later starts, observers with
/// actions, stimuli during the run.
extension Builder {
    /// Issue 38's additions (see `PredictSetup.make`).
    mutating func widen() {
        if rng.chance(0.35) { startLater(by: Int.random(in: 1...3, using: &rng)) }
        for index in setup.observers.indices where rng.chance(0.4) {
            setup.observers[index].action = observerAction()
        }
        // An observer of one activity that acts, often the entry or the exit.
        if rng.chance(0.35) {
            let activity = rng.pick([Activity.entry, .exit, .entry, .exit] + Activity.allCases)
            setup.observers.append(
                .init(
                    activities: [activity], repeats: rng.chance(0.7),
                    mode: rng.pick(["common", "default", setup.runMode]), order: setup.observers.count + 1,
                    action: observerAction()))
        }
    }

    mutating func observerAction() -> PredictSetup.ObserverAction {
        // Not the callout run's source: `withoutCalloutRun` takes it away.
        let custom = setup.sources.indices.filter {
            !setup.sources[$0].port && setup.calloutRun?.from != .source($0)
        }
        if let source = custom.randomElement(using: &rng), rng.chance(0.4) {
            return .signal(source: source, wakeUp: rng.chance(0.5))
        }
        return .stop
    }

    /// The run starts `shift` slots later; the slots before it get timers
    /// that are due by then and messages written to ports.
    mutating func startLater(by shift: Int) {
        for index in setup.timers.indices { setup.timers[index].firstSlot += shift }
        for index in setup.performs.indices { setup.performs[index].delaySlot? += shift }
        setup.stimuli = setup.stimuli.map { ($0.slot + shift, $0.what) }
        if setup.deadlineSlot > 0 { setup.deadlineSlot += shift }
        occupied = Set(occupied.map { $0 + shift })
        setup.startSlot = shift
        occupied.insert(shift)
        let ports = setup.sources.indices.filter { setup.sources[$0].port }
        for slot in 1..<shift + 1 where slot < shift && claim([slot]) {
            if let port = ports.randomElement(using: &rng), rng.chance(0.6) {
                setup.preMessages.append((port, slot))
            } else {
                setup.timers.append(
                    .init(
                        modes: rng.pick([[setup.runMode], ["common"], ["default"]]), firstSlot: slot,
                        intervalSlots: nil, maxFires: nil, invalidated: false, stop: rng.chance(0.3)))
            }
        }
    }

    mutating func addObserver(order: Int) {
        let activities = Activity.allCases.filter { _ in rng.chance(0.5) }
        guard !activities.isEmpty else { return }
        setup.observers.append(
            .init(
                activities: activities, repeats: rng.chance(0.7), mode: rng.pick(["common", "default", "tracking"]),
                order: order))
    }

    mutating func addStimulus(horizon: Int) {
        let slot = Int.random(in: 1...max(1, horizon - 1), using: &rng)
        guard slot < horizon, claim([slot]) else { return }
        var choices: [PredictSetup.StimulusPlan] = [
            // One mode: a perform into two modes whose carriers are not in
            // them yet wakes the loop once per mode, as the queueing thread
            // adds each: how many of those wake-ups find it asleep is timing.
            .stop, .wakeUp, .perform(keys: [performKeys[0]], stop: rng.chance(0.1)),
        ]
        if let source = setup.sources.indices.randomElement(using: &rng) {
            if setup.sources[source].port {
                choices.append(.message(source: source))
            } else {
                choices.append(.signal(source: source, wakeUp: rng.chance(0.5)))
            }
            choices.append(.invalidateSource(source, wakeUp: rng.chance(0.5)))
        }
        if let timer = setup.timers.indices.randomElement(using: &rng) {
            choices.append(.invalidateTimer(timer, wakeUp: rng.chance(0.5)))
        }
        if let perform = setup.performs.indices.first(where: {
            setup.performs[$0].delaySlot != nil && !setup.performs[$0].cancelled
        }) {
            choices.append(.cancelDelayed(perform: perform))
        }
        setup.stimuli.append((slot, rng.pick(choices)))
    }
}
