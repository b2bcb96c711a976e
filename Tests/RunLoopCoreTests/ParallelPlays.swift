import Foundation
import Primitives
import RunLoopCore
import RunLoopTestSupport

/// The N-thread runner the timing differentials share (the predict and the
/// phase differential): `threads` threads take the items in order, each
/// played up to `attempts` times until `play` judges it (nil: the machine
/// did not play it on time, so it is played again). Items still not played
/// on time are then played again, `attempts` tries each round, for up to
/// `patience` seconds and while a round judges any of them: a burst of
/// load on the host (a normal `make test` here once had 34 of 61 phase
/// setups late on all 12 tries within one 40 s stretch, while the Swift
/// suite before it had run at its usual pace) ends, and the setups are
/// judged after it instead of not at all.
enum ParallelPlays {
    struct Outcome<Item: Sendable>: Sendable {
        /// The items that disagreed, with their problems.
        var failures: [(Item, [String])] = []
        /// Plays beyond each item's first.
        var replays = 0
        /// The items never played on time (not judged).
        var late: [Item] = []
        /// Items never played on time in every try (not judged).
        var unplayed: Int { late.count }
    }

    /// Seconds the late items are played again, at most, after the first round.
    static let patience = 60 * ServerProcess.slowdown

    /// Blocks until every item is judged or `patience` has passed (runs
    /// mostly sleep: more threads than cores is the point). A play that
    /// throws is a problem.
    static func play<Item: Sendable>(
        _ items: [Item], threads: Int, attempts: Int, _ play: @escaping @Sendable (Item) throws -> [String]?
    ) -> Outcome<Item> {
        var outcome = round(items, threads: threads, attempts: attempts, play)
        let deadline = Monotonic.now() + patience
        while !outcome.late.isEmpty && Monotonic.now() < deadline {
            let again = round(outcome.late, threads: threads, attempts: attempts, play)
            outcome.failures += again.failures
            // Every play of a late item is a replay: its first was in the first round.
            outcome.replays += again.replays + outcome.late.count
            // A round that judged none: these are late whatever the load (a
            // quiet run has a few), not waiting for a burst to pass.
            let stuck = again.late.count == outcome.late.count
            outcome.late = again.late
            if stuck { break }
        }
        return outcome
    }

    /// One round: each item played up to `attempts` times.
    private static func round<Item: Sendable>(
        _ items: [Item], threads: Int, attempts: Int, _ play: @escaping @Sendable (Item) throws -> [String]?
    ) -> Outcome<Item> {
        let state = Locked((next: 0, done: 0, outcome: Outcome<Item>()))
        for _ in 0..<threads {
            Thread {
                while true {
                    let index = state.withLock { s in
                        defer { s.next += 1 }
                        return s.next
                    }
                    guard index < items.count else { break }
                    let item = items[index]
                    var problems: [String]?
                    var attempt = 0
                    while problems == nil && attempt < attempts {
                        attempt += 1
                        do { problems = try play(item) } catch { problems = ["setup failed: \(error)"] }
                    }
                    state.withLock { s in
                        s.outcome.replays += attempt - 1
                        if let problems, !problems.isEmpty { s.outcome.failures.append((item, problems)) }
                        if problems == nil { s.outcome.late.append(item) }
                    }
                }
                state.withLock { $0.done += 1 }
                state.notifyAll()
            }.start()
        }
        return state.withLock(when: { $0.done == threads }) { $0.outcome }
    }
}
