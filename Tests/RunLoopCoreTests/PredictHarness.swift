import CoreFoundation
import Foundation
import Primitives
import CFOracle
import RunLoopTestSupport

@testable import RunLoopCore

/// Builds a generated setup on a real worker, asks the predictor, runs it
/// (applying the stimuli at their slots) and compares.
struct PredictHarness {
    let registry: WorkerRegistry
    /// The mode a nested setup's host run runs in: no generated item is in it.
    static let hostMode = "nest-host"
    /// Each nested run's exit, by its worker, as the host's perform saw it.
    let nestedExits = Locked<[ObjectIdentifier: RunExit]>([:])
    /// Every nested run's exit (depth above 0), by thread id, in the order
    /// they returned: the runs the setups' callouts start.
    let runExits: Locked<[String: [RunExit]]>

    /// A harness on a registry of its own that keeps every nested run's exit.
    init() {
        let exits = Locked<[String: [RunExit]]>([:])
        let registry = WorkerRegistry(limits: Limits()) { event in
            guard case .runExit(let thread, let exit) = event, exit.depth > 0 else { return }
            exits.withLock { $0[thread, default: []].append(exit) }
        }
        self.init(registry: registry, runExits: exits)
    }

    /// Registers `predictNested` on `registry`: the host run's perform, which
    /// runs the setup's run nested (`runNested`, as the `runNested` selector
    /// does), keeps its whole exit, then stops the host run.
    private init(registry: WorkerRegistry, runExits: Locked<[String: [RunExit]]>) {
        self.registry = registry
        self.runExits = runExits
        let exits = nestedExits
        registry.selectors.register(
            Selector(
                name: "predictNested", summary: "the predict test's nested run",
                arguments: [
                    ArgumentSpec("mode", .string, maximum: 64, summary: "mode to run in"),
                    ArgumentSpec("seconds", .number, required: true, minimum: 0, summary: "run timeout"),
                    ArgumentSpec("returnAfterSourceHandled", .boolean, defaultValue: false, summary: "flag"),
                ]
            ) { context throws(RunLoopError) in
                let exit = try context.worker.runNested(
                    mode: RunLoopMode(context.string("mode")), seconds: context.number("seconds"),
                    returnAfterSourceHandled: context.bool("returnAfterSourceHandled"))
                exits.withLock { $0[ObjectIdentifier(context.worker)] = exit }
                CFRunLoopStop(CFRunLoopGetCurrent())
                return SelectorOutcome(.null)
            })
    }

    /// How far the real end may be from the predicted one (scheduling).
    static let toleranceMs = 15.0

    struct Built {
        var worker: Worker
        var anchor: Double
        var timers: [String] = []
        var sources: [String] = []
        var performs: [String] = []
        var observers: [String] = []
        /// Stops the worker refused (why), as they happened.
        let refused = Locked<[(at: Date, notRunning: Bool, why: String)]>([])
        /// When each stop was asked for.
        let stopsMade = Locked<[Date]>([])
    }

    /// The run returned: with its exit, or none (it failed; or, nested, the
    /// host run ended before its perform began the nested run).
    struct Ended: Sendable {
        var exit: RunExit?
    }

    /// Test hook: runs on the harness thread once the run is requested,
    /// before the first stimulus, and gets a call that waits for the run to
    /// return (a stand-in for this thread being taken off the CPU there).
    var beforeStimuli: (@Sendable (_ waitForRunEnd: () -> Void) -> Void)?

    /// How late a stimulus, the run's start or a timer's fire may be before
    /// the setup counts as not played as planned (and is played again).
    static let lateMs = 8.0

    /// Plays one setup; returns the disagreements (empty: it agrees), or
    /// nil when the machine could not play it on time (a stimulus, the
    /// run's start or a timer late by more than `lateMs`).
    func play(_ setup: PredictSetup, oracle: Bool = true) throws -> [String]? {
        var built = try build(setup)
        defer { built.worker.endAndWait(timeout: 10) }
        // Building must end well before the first slot, or its delays were cut.
        if (Monotonic.now() - built.anchor) * 1000 > PredictSetup.quantum * 1000 - Self.lateMs { return nil }
        let q = PredictSetup.quantum
        // Before a run that starts later: messages at their slots, then its start.
        let pause = Locked(false)
        for (source, slot) in setup.preMessages.sorted(by: { $0.slot < $1.slot }) {
            let due = built.anchor + Double(slot) * q
            pause.withLock(when: { $0 }, timeout: max(0, due - Monotonic.now())) { _, _ in }
            _ = try built.worker.sendMessage(toSource: built.sources[source], msgid: slot, data: "before")
            if (Monotonic.now() - due) * 1000 > Self.lateMs { return nil }
        }
        if setup.startSlot > 0 {
            let due = built.anchor + Double(setup.startSlot) * q
            pause.withLock(when: { $0 }, timeout: max(0, due - Monotonic.now())) { _, _ in }
            if (Monotonic.now() - due) * 1000 > Self.lateMs { return nil }
        }
        let seconds = setup.deadlineSlot == 0 ? 0 : Double(setup.deadlineSlot) * q - (Monotonic.now() - built.anchor)
        let readDate = Date()
        let model = built.worker.loopModel()
        let read = Monotonic.now()
        var placeholders: [String] = []
        let stimuli = setup.stimuli.map { slot, what in
            Stimulus(at: built.anchor + Double(slot) * q - read, stimulus(what, built, &placeholders))
        }
        let prediction = Predictor.predict(
            model, mode: setup.runMode, seconds: seconds, returnAfterSourceHandled: setup.returnAfterSourceHandled,
            stimuli: stimuli)
        let box = Locked<Ended?>(nil)
        let tid = built.worker.osThreadId.load(ordering: .relaxed)
        guard let waitedBefore = SchedStat.thread(tid)?.waitMs else {
            return ["no schedstat for the loop thread (\(tid)): its lateness cannot be measured"]
        }
        let stolenBefore = SchedStat.stolenMs()
        let nested = setup.nested
        if nested {
            // The host run's only item: a perform that runs the setup's run
            // nested, then stops the host.
            let args: [String: Value] = [
                "mode": .string(setup.runMode), "seconds": .number(seconds),
                "returnAfterSourceHandled": .bool(setup.returnAfterSourceHandled),
            ]
            _ = try built.worker.perform(
                PerformSpec(
                    call: SelectorCall(selector: "predictNested", args: args), modes: [RunLoopMode(Self.hostMode)]))
        }
        let exits = nestedExits
        let key = ObjectIdentifier(built.worker)
        try built.worker.run(
            mode: RunLoopMode(nested ? Self.hostMode : setup.runMode), seconds: nested ? seconds + 10 : seconds,
            returnAfterSourceHandled: nested ? false : setup.returnAfterSourceHandled
        ) { result in
            let exit = nested ? exits.withLock { $0.removeValue(forKey: key) } : try? result.get()
            box.withLock { $0 = Ended(exit: exit) }
            box.notifyAll()
        }
        var real: [String] = []
        var lateMs = 0.0
        var awakeAt: [Int] = []
        var blockedAt: [Int] = []
        beforeStimuli?({ box.withLock(when: { $0 != nil }, timeout: seconds + 10) { _, _ in } })
        for (slot, what) in setup.stimuli {
            let due = built.anchor + Double(slot) * q
            let ended = box.withLock(when: { $0 != nil }, timeout: max(0, due - Monotonic.now())) { _, ready in ready }
            if ended {
                // The run returned before this stimulus was made. Seen well
                // after its slot, this thread was late (off the CPU): the run
                // went on without a stimulus the plan has (a stop never sent
                // lets it reach its deadline), so it was not played as planned.
                lateMs = max(lateMs, (Monotonic.now() - due) * 1000)
                break
            }
            // Every stimulus falls where the plan has the loop asleep (all
            // else is a quantum away and takes microseconds). A loop still
            // awake in its run is behind, whatever held it (the CPU, a lock):
            // CF would drop the stimulus's wake-up (it ignores wake-ups from
            // the run's start to its first pass, and from a wake to the next).
            if let loop = built.worker.runLoop, !CFRunLoopIsWaiting(loop), built.worker.hasRequestedRun {
                awakeAt.append(slot)
            }
            if let id = apply(what, &built) { real.append(id) }
            // Measured once the stimulus is done: its thread may be taken off
            // the CPU inside the call, before the signal or wake-up it makes.
            lateMs = max(lateMs, (Monotonic.now() - due) * 1000)
            // `lateMs` after the stimulus the loop has long handled what it
            // woke for and sleeps in ppoll again (or still, if nothing woke
            // it). Blocked on a futex instead, it waits for a lock another,
            // descheduled, thread holds: after a wake-up, before its turn
            // (what no run-queue count shows; its wake merges into a later
            // turn).
            let probe = due + Self.lateMs / 1000
            let over = box.withLock(when: { $0 != nil }, timeout: max(0, probe - Monotonic.now())) { _, ready in ready }
            if !over, built.worker.hasRequestedRun, Self.inFutex(tid) { blockedAt.append(slot) }
        }
        // A probe of the machine: the harness itself wakes at the predicted
        // end; waking late means threads were not scheduled on time.
        if let atMs = prediction.atMs {
            let target = read + atMs / 1000 + 0.001
            let ended = box.withLock(when: { $0 != nil }, timeout: max(0, target - Monotonic.now())) { _, ready in
                ready
            }
            if !ended { lateMs = max(lateMs, (Monotonic.now() - target) * 1000) }
        }
        let ended = box.withLock(when: { $0 != nil }, timeout: seconds + 10) { value, _ in value }
        guard let ended else { return ["the run did not return"] }
        // Nested, a stop that reached the host run before its perform began
        // the nested run: the plan was not played (and no nested run ran).
        guard let exit = ended.exit else { return nested ? nil : ["the run failed"] }
        // The loop thread's time spent runnable but not running during the
        // run (the kernel's count): every wake-up, callout and check it made
        // was late by up to that much.
        let waitedMs = max(0, (SchedStat.thread(tid)?.waitMs ?? .infinity) - waitedBefore)
        // In a virtual machine the host may take a CPU away from every thread
        // at once (steal time), which no run-queue count shows: timers and
        // wake-ups all come late together, and wakes due apart (a stale
        // timerfd, then the deadline) are served in one turn.
        let stolenMs = max(0, SchedStat.stolenMs() - stolenBefore)
        let turns = built.worker.turns(matching: TurnFilter(run: exit.run)).turns
        // The runs the setup's callouts ran nested, with their turns.
        let inner = runExits.withLock { $0.removeValue(forKey: built.worker.id) ?? [] }.filter {
            $0.depth > exit.depth
        }
        let innerTurns = inner.map { built.worker.turns(matching: TurnFilter(run: $0.run)).turns }
        let startMs = (exit.endedAt.timeIntervalSince(readDate) - exit.duration) * 1000
        // (A timer due before a run that starts later fires late by design.)
        let timerLateMs =
            zip(setup.timers, built.timers).filter { $0.0.firstSlot > setup.startSlot }.compactMap {
                try? built.worker.timerSnapshot($0.1).lateness.maxMs
            }.max() ?? 0
        // What wakes the loop (CF's timeout, delivered by a dispatch timer on
        // a utility queue; a timerfd; a stimulus) needs the loop's thread to
        // run: on a loaded machine its last wake can come late. A run that
        // ends as predicted but whose last turn began well after the
        // predicted end was not played as planned (played again; a late
        // end every time is reported).
        var timeoutLateMs = 0.0
        if exit.reason == prediction.exitReason, let atMs = prediction.atMs, let last = turns.last,
            last.wokeBy.kind != .none
        {
            timeoutLateMs = last.startedAt.timeIntervalSince(readDate) * 1000 - atMs
        }
        // Every callout here takes microseconds (but a nested run, whose
        // turns count on their own): a turn busy for longer had its thread
        // taken off the CPU, or blocked on a lock.
        let busyMs = Self.busyMs(turns + innerTurns.joined(), nestedRuns: inner)
        if ProcessInfo.processInfo.environment["PREDICT_DEBUG"] != nil, !built.refused.withLock({ $0.isEmpty }) {
            print("debug \(setup.seed) stops refused: \(built.refused.withLock { $0.map(\.why) })")
        }
        // A turn the run's timeout woke began that long after the deadline:
        // CF's timeout (a dispatch timer on a utility queue) or the loop
        // thread itself (waiting for a lock after epoll returned, which no
        // run-queue count shows) was late, whatever the prediction was.
        let runStart = exit.endedAt.addingTimeInterval(-exit.duration)
        var deadlineLateMs =
            turns.filter { $0.wokeBy.kind == .timeout }.map {
                ($0.startedAt.timeIntervalSince(runStart) - seconds) * 1000
            }.max() ?? 0
        if let plan = setup.calloutRun {
            for (run, runTurns) in zip(inner, innerTurns) {
                let start = run.endedAt.addingTimeInterval(-run.duration)
                for turn in runTurns where turn.wokeBy.kind == .timeout {
                    let late = turn.startedAt.timeIntervalSince(start) - Double(plan.slots) * q
                    deadlineLateMs = max(deadlineLateMs, late * 1000)
                }
            }
        }
        // A stop refused because the run had not begun, or CF not entered
        // it, yet: the run began late.
        // Nested, a stop made before the nested run began stopped the host
        // run instead (the innermost run then): the nested run never saw it.
        let stopBeforeStart =
            built.refused.withLock { $0 }.contains {
                ($0.notRunning && $0.at < runStart) || $0.why.hasPrefix("stop_dropped")
            } || (nested && built.stopsMade.withLock { $0 }.contains { $0 < runStart })
        if max(lateMs, startMs, timerLateMs, timeoutLateMs, busyMs, waitedMs, deadlineLateMs, stolenMs) > Self.lateMs
            || !awakeAt.isEmpty || !blockedAt.isEmpty || stopBeforeStart
        {
            if ProcessInfo.processInfo.environment["PREDICT_DEBUG"] != nil {
                print(
                    "debug \(setup.seed) late: stimuli \(lateMs), start \(startMs), timers \(timerLateMs), last wake \(timeoutLateMs), busy \(busyMs), loop thread runnable but waiting \(waitedMs) ms, CPU time stolen by the host \(stolenMs) ms; deadline's turn \(deadlineLateMs) ms; loop awake at stimulus slots \(awakeAt), stop before the run began: \(stopBeforeStart); blocked on a lock after stimulus slots \(blockedAt); exit \(exit.reason) after \(exit.duration * 1000) ms, predicted \(prediction.exitReason?.name ?? "-") at \(prediction.atMs ?? -1), \(prediction.reasons)\n\(setup)"
                )
            }
            return nil
        }
        let rename: (String) -> String = { id in
            placeholders.firstIndex(of: id).flatMap { $0 < real.count ? real[$0] : nil } ?? id
        }
        if ProcessInfo.processInfo.environment["PREDICT_DEBUG"] != nil {
            print(
                "debug \(setup.seed): read at \((read - built.anchor) * 1000) ms, seconds \(seconds), exit \(exit.reason) \(exit.cause?.code ?? "") after \(exit.duration * 1000) ms, ended \(exit.endedAt.timeIntervalSince(readDate) * 1000) ms after read; predicted \(prediction.exitReason?.name ?? "-") at \(prediction.atMs ?? -1), reasons \(prediction.reasons)\n\(setup)"
            )
        }
        if ProcessInfo.processInfo.environment["PREDICT_DEBUG"] != nil {
            for turn in built.worker.turns(matching: TurnFilter()).turns {
                print(
                    "debug turn run \(turn.run) depth \(turn.depth) \(Self.describe(turn.wokeBy, turn.callouts.map(\.ref), turn.end, { $0 }))"
                )
            }
            print("debug activities \(built.worker.activities().map { "\($0.activity.rawValue)@\($0.mode)" })")
            for p in prediction.nested {
                print(
                    "debug predicted nested \(p.exitReason?.name ?? "-") \(p.turns.map { Self.describe($0.wokeBy, $0.callouts, $0.end, rename) })"
                )
            }
        }
        var problems = compare(prediction, exit, turns, atMs: exit.endedAt.timeIntervalSince(readDate) * 1000, rename)
        if exit.depth != (nested ? 1 : 0) { problems.append("the run's depth is \(exit.depth), nested \(nested)") }
        if prediction.nested.count != inner.count {
            problems.append("nested runs: predicted \(prediction.nested.count), got \(inner.count)")
        }
        for (index, (predicted, run)) in zip(prediction.nested, inner).enumerated() {
            problems += compare(predicted, run, innerTurns[index], atMs: run.duration * 1000, rename).map {
                "nested run \(index + 1): \($0)"
            }
        }
        guard oracle else { return problems }
        // The third answer: the same setup on plain CF (no runloopd code).
        let cf = CFOracle.play(setup.oracleSetup)
        if cf.lateMs > Self.lateMs {
            if ProcessInfo.processInfo.environment["PREDICT_DEBUG"] != nil {
                let json = (try? JSONEncoder().encode(setup.oracleSetup)).map { String(decoding: $0, as: UTF8.self) }
                print("debug \(setup.seed) oracle late \(cf.lateMs) ms: \(json ?? "")")
            }
            return nil
        }
        let label = Self.labels(built, placeholders: placeholders)
        problems += Self.compareOracle(prediction, cf, label: { id in label[rename(id)] ?? label[id] ?? id })
        return problems
    }

    /// The longest of `turns`' busy times, each less the nested runs its
    /// `runNested` callouts ran (among `nestedRuns`: one level deeper, begun
    /// and ended within the turn; their turns count on their own). Only the
    /// runs' own durations are taken off, not their callouts' whole time:
    /// what a callout does around its run (the selector's checks, the run's
    /// exit event, recorded under a lock that another thread may hold while
    /// off the CPU, blocking this one where no run-queue count shows it) is
    /// the turn's, and makes it late.
    static func busyMs(_ turns: [TurnRecord], nestedRuns: [RunExit]) -> Double {
        // Turns and runs are dated by the wall clock, busy times by the
        // monotonic one: a millisecond's slack either side.
        let slack = 0.001
        return turns.map { turn in
            let callouts = turn.callouts.filter { $0.ref.selector == "runNested" }.map(\.ms).reduce(0, +)
            guard callouts > 0 else { return turn.busyMs }
            let ended = turn.startedAt.addingTimeInterval(turn.busyMs / 1000 + slack)
            let runs = nestedRuns.filter { run in
                run.depth == turn.depth + 1 && run.endedAt <= ended
                    && run.endedAt.addingTimeInterval(-run.duration) >= turn.startedAt.addingTimeInterval(-slack)
            }
            return turn.busyMs - min(callouts, runs.map { $0.duration * 1000 }.reduce(0, +))
        }.max() ?? 0
    }

    /// Whether thread `tid` is inside a futex wait (a lock or condition):
    /// the first field of `/proc/self/task/<tid>/syscall`.
    static func inFutex(_ tid: Int32) -> Bool {
        #if arch(x86_64)
            let futex = "202"
        #else
            let futex = "98"
        #endif
        let text = (try? String(contentsOfFile: "/proc/self/task/\(tid)/syscall", encoding: .utf8)) ?? ""
        return text.split(separator: " ").first == Substring(futex)
    }
}
