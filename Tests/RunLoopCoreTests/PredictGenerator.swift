import Foundation
import RunLoopTestSupport

@testable import RunLoopCore

/// One generated loop and one run of it. Every event (a timer's fire, a
/// delayed perform, a stimulus, the deadline) sits on its own slot of a
/// `quantum`-wide grid, so no two fall within a quantum of each other and
/// the truth does not depend on timing.
struct PredictSetup: CustomStringConvertible, Sendable {
    struct TimerPlan {
        var modes: [String]
        var firstSlot: Int
        var intervalSlots: Int?
        var maxFires: Int?
        var invalidated: Bool
        var stop: Bool
    }
    struct SourcePlan {
        var port: Bool
        var modes: [String]
        var order: Int
        var signalled: Bool
        var wakeUp: Bool
        var messages: Int
    }
    struct PerformPlan {
        var keys: [String]
        var delaySlot: Int?
        var cancelled: Bool
        var stop: Bool
        /// A block perform (`via: block`), never delayed.
        var block = false
    }
    struct ObserverPlan {
        var activities: [Activity]
        var repeats: Bool
        var mode: String
        var order: Int
        /// Its action at every activity it watches: `stop`, or a `signal`
        /// of a custom source (by index) with or without a wake-up.
        var action: ObserverAction? = nil
    }
    enum ObserverAction: Equatable {
        case stop
        case signal(source: Int, wakeUp: Bool)
        /// `runNested` from the observer's callout: a run of `slots` slots
        /// in `mode` (CF skips an observer while its callout runs).
        case runNested(mode: String, slots: Int, returnAfterSourceHandled: Bool)
    }
    /// A callout inside the run that runs the loop again (`runNested`):
    /// the item that makes it (a timer, a signalled custom source or a
    /// queued perform, each added for it) and the nested run.
    struct CalloutRunPlan {
        enum From: Equatable {
            case timer(Int)
            case source(Int)
            case perform(Int)
        }
        var from: From
        var mode: String
        /// Its seconds in slots (0: a run of 0 seconds).
        var slots: Int
        var returnAfterSourceHandled: Bool

        var call: SelectorCall {
            SelectorCall(
                selector: "runNested",
                args: [
                    "mode": .string(mode), "seconds": .number(Double(slots) * PredictSetup.quantum),
                    "returnAfterSourceHandled": .bool(returnAfterSourceHandled),
                ])
        }
    }
    enum StimulusPlan {
        case stop
        case wakeUp
        case signal(source: Int, wakeUp: Bool)
        case message(source: Int)
        case invalidateSource(Int, wakeUp: Bool)
        case invalidateTimer(Int, wakeUp: Bool)
        /// `CFRunLoopRemoveSource` of a source from one of its modes (by name).
        case removeSource(Int, mode: String, wakeUp: Bool)
        /// `CFRunLoopObserverInvalidate`.
        case invalidateObserver(Int)
        case perform(keys: [String], stop: Bool)
        /// A block perform (`via: block`) queued during the run.
        case block(keys: [String], stop: Bool)
        case cancelDelayed(perform: Int)
    }

    static let quantum = 0.025

    var seed: UInt64
    var keepAlive: KeepAlive
    var runMode: String
    var trackingIsCommon: Bool
    var timers: [TimerPlan] = []
    var sources: [SourcePlan] = []
    var performs: [PerformPlan] = []
    var observers: [ObserverPlan] = []
    var stimuli: [(slot: Int, what: StimulusPlan)] = []
    /// The deadline's slot; 0: a run of 0 seconds (one poll).
    var deadlineSlot: Int
    var returnAfterSourceHandled: Bool
    /// Played as a nested run: started by a perform inside a run of
    /// `PredictHarness.hostMode` (`runNested` from a handler), not as a
    /// top-level run. The same loop either way: CF gives a nested run its
    /// own per-run record (stop flag, ignored wake-ups), so the prediction
    /// must not change.
    var nested = false
    /// A callout of the run that runs the loop nested (`runNested`).
    var calloutRun: CalloutRunPlan?
    /// The slot the run starts at (0: as soon as the loop is built). Before
    /// it, timers fall due and messages are written to ports
    /// (`preMessages`), so the run begins with them all ready.
    var startSlot = 0
    /// Messages written before the run: port source index and slot.
    var preMessages: [(source: Int, slot: Int)] = []

    var description: String {
        "seed \(seed): keepAlive \(keepAlive), run \(runMode)\(nested ? " nested" : "") from slot \(startSlot) to \(deadlineSlot)"
            + (calloutRun.map { " with a nested run from a callout \($0)" } ?? "")
            + " rash=\(returnAfterSourceHandled), tracking common=\(trackingIsCommon); timers \(timers);"
            + " sources \(sources); performs \(performs); observers \(observers); stimuli \(stimuli)"
            + (preMessages.isEmpty ? "" : "; messages before the run \(preMessages)")
    }

    /// A random setup from `seed`. `widened` (issue 38's generator) adds,
    /// from a generator of its own so the rest of the seed's loop stays as
    /// it was: a run that starts later, with timers already due and port
    /// messages written before it, and observers with actions (a stop, a
    /// signal) on the activities they watch.
    static func make(seed: UInt64, widened: Bool = true) -> PredictSetup {
        var builder = Builder(rng: SplitMix(seed))
        _ = builder.build(seed: seed)
        // Drawn from generators of their own, the item added last: a seed's
        // loop is the same whether it is played nested or not, and without
        // its callout's nested run (`withoutCalloutRun`).
        var side = SplitMix(seed ^ 0x6E65_7374_6564_2121)
        builder.setup.nested = side.chance(0.25)
        builder.rng = SplitMix(seed ^ 0x6361_6C6C_6F75_7421)
        if builder.rng.chance(0.3) { builder.addCalloutRun() }
        if widened {
            builder.rng = SplitMix(seed ^ 0x7769_6465_6E65_6421)
            builder.widen()
        }
        if widened {
            // Block performs (issue 38), from a generator of their own.
            builder.rng = SplitMix(seed ^ 0x626C_6F63_6B73_2121)
            builder.addBlocks()
            // Observers that run the loop nested and removals during the
            // run, from a generator of their own.
            builder.rng = SplitMix(seed ^ 0x7265_6D6F_7665_2121)
            builder.addNestingObserver()
            builder.addRemoval()
        }
        return builder.setup
    }

    /// The `runNested` call of `item` (a timer, source or perform by
    /// index), if its callout runs the loop nested.
    func calloutCall(_ item: CalloutRunPlan.From) -> SelectorCall? {
        calloutRun?.from == item ? calloutRun?.call : nil
    }

    /// `modes` with `common` read as the modes it stands for.
    func resolved(_ modes: [String]) -> Set<String> {
        Set(modes.flatMap { $0 == "common" ? (trackingIsCommon ? ["default", "tracking"] : ["default"]) : [$0] })
    }

    /// The modes of the item whose callout runs the loop nested, if any.
    var calloutItemModes: Set<String>? {
        switch calloutRun?.from {
        case .timer(let index): resolved(timers[index].modes)
        case .source(let index): resolved(sources[index].modes)
        case .perform(let index): resolved(performs[index].keys)
        case nil: nil
        }
    }

    /// The same loop without the callout's nested run (and its item).
    var withoutCalloutRun: PredictSetup {
        guard let plan = calloutRun else { return self }
        var setup = self
        setup.calloutRun = nil
        switch plan.from {
        // By index: the widened generator adds timers after it.
        case .timer(let index): setup.timers.remove(at: index)
        case .source: setup.sources.removeLast()
        case .perform(let index): setup.performs.remove(at: index)
        }
        return setup
    }
}

/// Builds a setup, claiming grid slots so events never collide.
struct Builder {
    var rng: SplitMix
    var occupied = Set<Int>()
    var setup = PredictSetup(
        seed: 0, keepAlive: .port, runMode: "default", trackingIsCommon: false, deadlineSlot: 4,
        returnAfterSourceHandled: false)
    var portWithMessages = false
    var performKeys = ["default"]

    mutating func build(seed: UInt64) -> PredictSetup {
        setup.seed = seed
        setup.keepAlive = rng.pick([.port, .timer, .none, .none])
        setup.runMode = rng.chance(0.7) ? "default" : "tracking"
        setup.trackingIsCommon = rng.chance(0.4)
        setup.returnAfterSourceHandled = rng.chance(0.5)
        setup.deadlineSlot = rng.chance(0.08) ? 0 : Int.random(in: 2...8, using: &rng)
        occupied.insert(setup.deadlineSlot)
        let horizon = max(setup.deadlineSlot, 1) + 1
        for _ in 0..<Int.random(in: 0...3, using: &rng) { addTimer(horizon: horizon) }
        for index in 0..<Int.random(in: 0...3, using: &rng) { addSource(order: index + 1) }
        addPerforms(horizon: horizon)
        for index in 0..<Int.random(in: 0...2, using: &rng) { addObserver(order: index + 1) }
        if setup.deadlineSlot > 0 {
            for _ in 0..<Int.random(in: 0...3, using: &rng) { addStimulus(horizon: setup.deadlineSlot) }
            setup.stimuli.sort { $0.slot < $1.slot }
        }

        return setup
    }

    mutating func modes() -> [String] {
        rng.pick([["default"], ["default"], ["tracking"], ["common"], ["default", "tracking"]])
    }

    /// Claims `slots` if all are free.
    mutating func claim(_ slots: [Int]) -> Bool {
        guard slots.allSatisfy({ !occupied.contains($0) }) else { return false }
        occupied.formUnion(slots)
        return true
    }

    mutating func addTimer(horizon: Int) {
        let first = Int.random(in: 1...horizon, using: &rng)
        let interval: Int? = rng.chance(0.5) ? Int.random(in: 1...3, using: &rng) : nil
        let maxFires: Int? = interval != nil && rng.chance(0.4) ? Int.random(in: 1...3, using: &rng) : nil
        let invalidated = rng.chance(0.15)
        // An invalidated timer leaves its mode's timerfd armed at its date
        // (CF on Linux never disarms it): that slot is an event too.
        var slots: [Int] = invalidated ? [first] : []
        if !invalidated {
            var slot = first
            while slot <= horizon + 1 && slots.count < (maxFires ?? 100) {
                slots.append(slot)
                guard let interval else { break }
                slot += interval
            }
        }
        guard claim(slots) else { return }
        setup.timers.append(
            .init(
                modes: modes(), firstSlot: first, intervalSlots: interval, maxFires: maxFires,
                invalidated: invalidated, stop: rng.chance(0.1)))
    }

    mutating func addSource(order: Int) {
        let port = rng.chance(0.4)
        var messages = 0
        // One port with messages at the start at most: two ready descriptors
        // at once are a race epoll decides.
        if port && !portWithMessages && rng.chance(0.4) {
            messages = Int.random(in: 1...3, using: &rng)
            portWithMessages = true
        }
        let signalled = !port && rng.chance(0.4)
        setup.sources.append(
            .init(
                port: port, modes: modes(), order: order, signalled: signalled, wakeUp: rng.chance(0.5),
                messages: messages))
    }

    mutating func addPerforms(horizon: Int) {
        // One set of keys per setup: two carriers in one mode have equal order.
        let keys = rng.pick([["default"], ["common"], ["tracking"], ["default", "tracking"]])
        performKeys = keys
        for _ in 0..<Int.random(in: 0...3, using: &rng) {
            var plan = PredictSetup.PerformPlan(keys: keys, delaySlot: nil, cancelled: false, stop: rng.chance(0.1))
            if rng.chance(0.4) {
                let slot = Int.random(in: 1...horizon, using: &rng)
                plan.keys = rng.pick([["default"], ["default"], ["tracking"], ["common"]])
                plan.cancelled = rng.chance(0.2)
                // A stop perform is cancelled by selector alone: it would
                // cancel every other delayed stop too.
                plan.stop = false
                guard claim([slot]) else { continue }
                plan.delaySlot = slot
            }
            setup.performs.append(plan)
        }
    }

    /// An item whose callout runs the loop nested for `slots` slots: a
    /// timer (one-shot, or repeating at more than the nested run's length),
    /// a custom source signalled before the run, or a queued perform (the
    /// setup's perform keys). Its nested run's deadline gets a slot of its own.
    mutating func addCalloutRun() {
        let slots = rng.chance(0.1) ? 0 : Int.random(in: 1...3, using: &rng)
        let mode = rng.pick(["default", "default", "tracking", "tracking", "nest-empty"])
        var plan = PredictSetup.CalloutRunPlan(
            from: .source(setup.sources.count), mode: mode, slots: slots,
            returnAfterSourceHandled: rng.chance(0.5))
        let horizon = max(setup.deadlineSlot, 1) + 1
        switch Int.random(in: 0..<3, using: &rng) {
        case 0:
            let first = Int.random(in: 1...horizon, using: &rng)
            let interval: Int? = rng.chance(0.4) ? Int.random(in: (slots + 1)...(slots + 3), using: &rng) : nil
            let maxFires: Int? = interval != nil && rng.chance(0.5) ? Int.random(in: 1...2, using: &rng) : nil
            var fires: [Int] = []
            var slot = first
            while slot <= horizon + 1 && fires.count < (maxFires ?? 100) {
                fires.append(slot)
                guard let interval else { break }
                slot += interval
            }
            let ends = slots > 0 ? fires.map { $0 + slots } : []
            guard Set(fires + ends).count == fires.count + ends.count, claim(fires + ends) else { return }
            plan.from = .timer(setup.timers.count)
            setup.timers.append(
                .init(
                    modes: rng.pick([[setup.runMode], [setup.runMode], ["common"], ["default", "tracking"]]),
                    firstSlot: first, intervalSlots: interval, maxFires: maxFires, invalidated: false, stop: false))
        case 1:
            // A version-0 callout's nested run ends before the run's deadline:
            // past it, the run can sleep on with its timeout spent (see
            // `nestedRunThatTakesTheTimeoutLeavesTheRunAsleep`).
            guard slots < max(setup.deadlineSlot, 1), slots == 0 || claim([slots]) else { return }
            setup.sources.append(
                .init(
                    port: false, modes: rng.pick([[setup.runMode], ["common"]]), order: setup.sources.count + 1,
                    signalled: true, wakeUp: false, messages: 0))
        default:
            guard slots < max(setup.deadlineSlot, 1), slots == 0 || claim([slots]) else { return }
            plan.from = .perform(setup.performs.count)
            setup.performs.append(.init(keys: performKeys, delaySlot: nil, cancelled: false, stop: false))
        }
        setup.calloutRun = plan
    }
}

extension Builder {
    /// Block performs (`via: block`): some queued before the run, some
    /// during it at a slot of their own, into any of the modes (`common`
    /// and two modes included: no carrier, so no two of equal order).
    mutating func addBlocks() {
        let keys: [[String]] = [["default"], ["common"], ["tracking"], ["default", "tracking"]]
        if rng.chance(0.35) {
            for _ in 0..<Int.random(in: 1...2, using: &rng) {
                setup.performs.append(
                    .init(keys: rng.pick(keys), delaySlot: nil, cancelled: false, stop: rng.chance(0.1), block: true))
            }
        }
        let first = setup.startSlot + 1
        guard setup.deadlineSlot > first, rng.chance(0.3) else { return }
        let slot = Int.random(in: first..<setup.deadlineSlot, using: &rng)
        guard claim([slot]) else { return }
        setup.stimuli.append((slot, .block(keys: rng.pick(keys), stop: rng.chance(0.15))))
        setup.stimuli.sort { $0.slot < $1.slot }
    }
}
