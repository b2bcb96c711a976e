/// A repeating timer's phase: a run that is not under way yet begins when a
/// request reaches the loop, at a point of each repeating timer's period
/// nobody chooses to the millisecond, and how many fires fall before the
/// run's deadline can depend on that point (a 100 ms timer in a 0.35 s run
/// fires 3 or 4 times). So a run that has not begun, in a mode with a
/// repeating timer, is played as if it began now and as if it began at each
/// later moment, within the longest of those timers' periods, where a fire
/// crosses its deadline (every timer's dates that much nearer); the answer
/// gives the count as a range, `certain` false, when it is not the same at
/// every such moment. A run under way (its deadline fixed) has one phase:
/// its count is told exactly.
extension Predictor {
    /// The delays (seconds) of the run's start at which it is played besides
    /// now. Shifting the start moves every timer's dates together, so what a
    /// run does changes only where a fire crosses the run's deadline or its
    /// start (a fire already due at the start runs once, and a repeating
    /// timer skips the fires it missed). Those points are its breakpoints:
    /// it is played a step either side of each and between each two
    /// neighbours, the deadline's crossings first (what the cap cuts last).
    /// None for a run without a timeout, or without a repeating timer in
    /// its mode.
    static func phaseShifts(_ model: LoopModel, mode: String, seconds: Double, margin: Double) -> [Double] {
        guard seconds > 0, seconds <= RunSimulator.intervalLimit else { return [] }
        let here = model.timers.filter { $0.valid && $0.modes.contains(mode) }
        guard let period = here.filter(phased).compactMap(\.interval).max() else { return [] }
        let step = 2.5 * margin
        // Starts up to one period later, and a step more (the piece just
        // past a crossing near the period's end is a real start too).
        let reach = period + step
        // Each fire at or past the deadline that a later start brings onto
        // it, and each fire a later start passes (due at the start).
        let crossings = landings(here, at: seconds, reach: reach)
        let starts = landings(here, at: 0, reach: reach)
        let first = around(crossings, step: step, reach: reach)
        let played = Set(first)
        let rest = around(crossings + starts, step: step, reach: reach).filter { !played.contains($0) }
        return Array((first + rest).prefix(maxPhases)).sorted()
    }

    /// The later starts, under `reach`, that bring a fire of one of `timers`
    /// to `at` seconds into the run: a one-shot timer's one, and a repeating
    /// timer's while fewer than 64 are found (a loop of hundreds of timers
    /// stays cheap to plan).
    private static func landings(_ timers: [LoopModel.Timer], at: Double, reach: Double) -> [Double] {
        var shifts: [Double] = []
        for timer in timers {
            guard let interval = timer.interval else {
                shifts.append(timer.next - at)
                continue
            }
            var k = max(0, ((at - timer.next) / interval).rounded(.up))
            while timer.next + k * interval - at < reach && shifts.count < 64 {
                shifts.append(timer.next + k * interval - at)
                k += 1
            }
        }
        return shifts
    }

    /// A step either side of each breakpoint in (0, `reach`) and the middle
    /// of each two neighbours: one start in every piece between them.
    private static func around(_ breakpoints: [Double], step: Double, reach: Double) -> [Double] {
        let points = Array(Set(breakpoints.filter { $0 > 0 && $0 < reach })).sorted()
        var shifts: [Double] = []
        for (index, point) in points.enumerated() {
            shifts += [point - step, point + step]
            if index + 1 < points.count { shifts.append((point + points[index + 1]) / 2) }
        }
        return Array(Set(shifts.filter { $0 > 0 && $0 < reach + step })).sorted()
    }

    /// The reason given when the call's budget (`--max-predict-steps`) ran
    /// out before every phase was played: the count may fall outside the
    /// range told.
    public static let phasesNotPlayed =
        "not every phase of its repeating timers could be played here (the predictor's budget, --max-predict-steps, ran out): the run's timer fires may fall outside the count or range told"

    /// At most this many later starts are played besides now.
    static let maxPhases = 48

    /// A timer whose phase decides where the run's start falls in its
    /// period: a repeating one that is not the keep-alive timer (a day
    /// between fires) nor a delayed perform.
    static func phased(_ timer: LoopModel.Timer) -> Bool {
        timer.interval != nil && timer.role != .keepAlive && !timer.perform
    }

    /// `model` as it stands `shift` seconds later, the loop not running
    /// meanwhile: every timer's date, and a timer descriptor left armed,
    /// that much nearer (a date passed is due at once), a port's message
    /// that much older.
    static func shifted(_ model: LoopModel, by shift: Double) -> LoopModel {
        var out = model
        for index in out.timers.indices { out.timers[index].next -= shift }
        out.staleTimerfd = out.staleTimerfd.mapValues { $0 - shift }
        for index in out.sources.indices { out.sources[index].readySince? -= shift }
        return out
    }

    /// `base` (the run played at its phase now) widened by the other phases:
    /// an exit that differs joins the race; a deadline's timer fires that
    /// differ become `timerFiresRange`; each makes the answer not certain.
    static func widenByPhase(
        _ base: Prediction, _ model: LoopModel, mode: String, seconds: Double, returnAfterSourceHandled: Bool,
        margin: Double, budget: PredictBudget
    ) -> Prediction {
        let shifts = phaseShifts(model, mode: mode, seconds: seconds, margin: margin)
        guard !shifts.isEmpty else { return base }
        var result = base
        var others: [Prediction.Outcome] = []
        for shift in shifts {
            guard budget.left > 0 else {
                result.certain = false
                result.reasons.append(Self.phasesNotPlayed)
                break
            }
            var sim = RunSimulator(
                model: shifted(model, by: shift), mode: mode, seconds: seconds,
                returnAfterSourceHandled: returnAfterSourceHandled, stimuli: [], margin: margin)
            sim.budget = budget
            let played = sim.run()
            if sim.outOfBudget {
                // A phase not played is a count not known: never a range
                // that leaves it out told as the whole answer.
                result.certain = false
                result.reasons.append(Self.phasesNotPlayed)
                break
            }
            others.append(played.outcome)
        }
        let all = [base.outcome] + (base.race?.outcomes ?? []) + others
        let key: (Prediction.Outcome) -> String = { "\($0.exitReason?.name ?? "none")|\($0.cause?.code ?? "")" }
        // Another exit at another phase: a race the run's start decides.
        if others.contains(where: { key($0) != key(base.outcome) }) {
            var outcomes = base.race?.outcomes ?? [base.outcome]
            for outcome in others where !outcomes.contains(where: { key($0) == key(outcome) }) {
                outcomes.append(outcome)
            }
            let phase = "where in its repeating timers' periods the run begins decides how it ends"
            result.race = Prediction.Race(
                outcomes: outcomes, why: base.race.map { "\($0.why); \(phase)" } ?? phase)
            result.certain = false
        }
        let fires = all.filter { $0.cause?.code == "deadline" }.compactMap { $0.cause?.details["timerFires"]?.number }
            .map { Int($0) }
        if let low = fires.min(), let high = fires.max(), low < high {
            result.timerFiresRange = low...high
            result.certain = false
            var ifNow = ""
            if var cause = result.cause, cause.code == "deadline", let number = cause.details["timerFires"]?.number {
                ifNow = " (\(Int(number)) if it began now)"
                cause.message =
                    "the run's \(ExitCause.seconds(seconds)) passed; \(low) to \(high) timer fires ran meanwhile, "
                    + "as many as the phase it begins at allows, and timers never count as handled sources"
                result.outcome.cause = cause
            }
            let names = model.timers.filter { $0.valid && $0.modes.contains(mode) && phased($0) }.map(\.id)
            result.reasons.append(
                "where in the period of \(names.joined(separator: ", ")) the run begins (a request reaches the loop a moment after this answer) decides how many timer fires fall before its deadline: \(low) to \(high)\(ifNow)"
            )
        }
        let times = all.compactMap(\.atMs)
        if let lo = times.min(), let hi = times.max(), hi > lo {
            result.windowMs = [min(lo, result.windowMs?.first ?? lo), max(hi, result.windowMs?.last ?? hi)]
        }
        return result
    }
}
