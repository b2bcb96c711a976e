import Foundation
import RunLoopTestSupport

@testable import RunLoopCore

/// The generator's nesting observers and removals (issue 38): an observer
/// whose callout runs the loop nested, and a source removed from a mode or
/// an observer invalidated while the run sleeps.
extension Builder {
    /// An observer of one activity whose action is `runNested`. CF marks an
    /// observer firing for its callout and skips it while it fires, so its
    /// own nested run does not call it again. A run of more than one poll
    /// comes only from a once-only `entry` observer (it starts with the
    /// run): its end gets a slot of its own, before the run's deadline.
    mutating func addNestingObserver() {
        guard rng.chance(0.25) else { return }
        let activity = rng.pick(Activity.allCases)
        let repeats = rng.chance(0.5)
        var slots = 0
        if activity == .entry && !repeats && rng.chance(0.6) {
            let length = Int.random(in: 1...2, using: &rng)
            if setup.startSlot + length < setup.deadlineSlot && claim([setup.startSlot + length]) { slots = length }
        }
        let action = PredictSetup.ObserverAction.runNested(
            mode: rng.pick([setup.runMode, "default", "tracking", "nest-empty"]), slots: slots,
            returnAfterSourceHandled: rng.chance(0.5))
        let observerMode = rng.pick(["common", "default", setup.runMode])
        // The callout's item claimed its nested run's end assuming the run
        // fires it. Outside the run's mode, only this observer's nested run
        // can fire it, at whatever event woke the loop: its nested run would
        // end on a slot nobody claimed (seed 13927038608326503265: it ended
        // on a stimulus's slot, a tie timing decides).
        if case .runNested(let mode, _, _) = action, let modes = setup.calloutItemModes,
            !modes.contains(setup.runMode), modes.contains(mode)
        {
            return
        }
        setup.observers.append(
            .init(
                activities: [activity], repeats: repeats, mode: observerMode, order: setup.observers.count + 1,
                action: action))
    }

    /// One removal at a slot of its own during the run: a source taken out
    /// of one of its modes (`CFRunLoopRemoveSource`, with or without a
    /// wake-up) or an observer invalidated (`CFRunLoopObserverInvalidate`).
    /// Not the callout run's source: `withoutCalloutRun` takes it away.
    mutating func addRemoval() {
        let first = setup.startSlot + 1
        guard setup.deadlineSlot > first, rng.chance(0.4) else { return }
        let slot = Int.random(in: first..<setup.deadlineSlot, using: &rng)
        var choices: [PredictSetup.StimulusPlan] = []
        let sources = setup.sources.indices.filter { setup.calloutRun?.from != .source($0) }
        if let source = sources.randomElement(using: &rng) {
            let mode = rng.pick(setup.sources[source].modes)
            choices.append(.removeSource(source, mode: mode, wakeUp: rng.chance(0.5)))
        }
        if let observer = setup.observers.indices.randomElement(using: &rng) {
            choices.append(.invalidateObserver(observer))
        }
        guard !choices.isEmpty, claim([slot]) else { return }
        setup.stimuli.append((slot, rng.pick(choices)))
        setup.stimuli.sort { $0.slot < $1.slot }
    }
}
