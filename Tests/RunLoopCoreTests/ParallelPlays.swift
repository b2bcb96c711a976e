import Foundation
import Primitives

/// The N-thread runner the timing differentials share (the predict and the
/// phase differential): `threads` threads take the items in order, each
/// played up to `attempts` times until `play` judges it (nil: the machine
/// did not play it on time, so it is played again).
enum ParallelPlays {
    struct Outcome<Item: Sendable>: Sendable {
        /// The items that disagreed, with their problems.
        var failures: [(Item, [String])] = []
        /// Plays beyond each item's first.
        var replays = 0
        /// Items never played on time in `attempts` tries (not judged).
        var unplayed = 0
    }

    /// Blocks until every item is played (runs mostly sleep: more threads
    /// than cores is the point). A play that throws is a problem.
    static func play<Item: Sendable>(
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
                        if problems == nil { s.outcome.unplayed += 1 }
                    }
                }
                state.withLock { $0.done += 1 }
                state.notifyAll()
            }.start()
        }
        return state.withLock(when: { $0.done == threads }) { $0.outcome }
    }
}
