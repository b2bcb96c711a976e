import CFOracle
import Foundation

/// One behaviour of plain CF that a claim of docs/claims.md rests on, played
/// with no runloopd code in it: `plays` returns every way CF differed from
/// what the case says (empty: confirmed). docs/claims.md names, for each
/// testable claim, the cases that confirm it (`Plain CF:`).
struct ClaimCase: Sendable, CustomStringConvertible {
    let name: String
    /// What plain CF shows, in words.
    let shows: String
    let plays: @Sendable () -> [String]

    var description: String { name }
}

/// Setups for `CFOracle` (slots of 25 ms; items named t0, s0, p0, o0 by
/// index), played until one is on time.
enum ClaimSetups {
    typealias Setup = OracleSetup

    static func setup(
        keepAlive: String = "port", runMode: String = "default", trackingIsCommon: Bool = false, startSlot: Int = 0,
        deadline: Int, rash: Bool = false, timers: [Setup.Timer] = [], sources: [Setup.Source] = [],
        performs: [Setup.Perform] = [], observers: [Setup.Observer] = [], stimuli: [Setup.Stimulus] = []
    ) -> Setup {
        Setup(
            quantum: 0.025, keepAlive: keepAlive, runMode: runMode, trackingIsCommon: trackingIsCommon,
            startSlot: startSlot, deadlineSlot: deadline, returnAfterSourceHandled: rash, nested: false, timers: timers,
            sources: sources, performs: performs, observers: observers, stimuli: stimuli)
    }

    static func timer(_ modes: [String] = ["default"], first: Int, every: Int? = nil, action: Setup.Action? = nil)
        -> Setup.Timer
    {
        Setup.Timer(
            modes: modes, firstSlot: first, intervalSlots: every, maxFires: nil, invalidated: false, action: action)
    }

    static func source0(
        _ modes: [String] = ["default"], order: Int = 0, signalled: Bool = false, action: Setup.Action? = nil
    ) -> Setup.Source {
        Setup.Source(
            port: false, modes: modes, order: order, signalled: signalled, wakeUp: false, messages: 0, action: action)
    }

    static func port(_ modes: [String] = ["default"], messages: Int = 0, action: Setup.Action? = nil) -> Setup.Source {
        Setup.Source(
            port: true, modes: modes, order: 0, signalled: false, wakeUp: false, messages: messages, action: action)
    }

    static func observer(_ activities: [String], repeats: Bool = true, mode: String = "default", order: Int = 0)
        -> Setup.Observer
    {
        Setup.Observer(activities: activities, repeats: repeats, mode: mode, order: order, action: nil)
    }

    static func perform(_ keys: [String] = ["default"], delay: Int? = nil, cancelled: Bool = false) -> Setup.Perform {
        Setup.Perform(keys: keys, delaySlot: delay, cancelled: cancelled, action: nil)
    }

    /// Plays `setup` until a play is on time (at most 30: each is under
    /// 0.3 s), then checks it; the problems, each prefixed with `label`.
    static func play(_ label: String, _ setup: Setup, _ check: (OracleResult.Run, OracleResult) -> [String])
        -> [String]
    {
        for _ in 0..<30 {
            let result = CFOracle.play(setup)
            guard result.lateMs <= 8 else { continue }
            return check(result.run, result).map { "\(label): \($0) (plain CF: \(result.run))" }
        }
        return ["\(label): never played on time in 30 attempts"]
    }

    static func expect(_ ok: Bool, _ problem: @autoclosure () -> String) -> [String] {
        ok ? [] : [problem()]
    }
}

extension OracleResult.Run {
    var callouts: [String] { turns.flatMap(\.callouts) }
    func count(_ label: String) -> Int { callouts.filter { $0 == label }.count }
    /// Whether `first` and then `second` are callouts of one turn (no sleep between).
    func inOneTurn(_ first: String, then second: String) -> Bool {
        turns.contains { turn in
            guard let a = turn.callouts.firstIndex(of: first), let b = turn.callouts.lastIndex(of: second) else {
                return false
            }
            return a < b
        }
    }
}
