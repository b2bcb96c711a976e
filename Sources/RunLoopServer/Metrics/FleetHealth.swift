import Foundation
import Primitives
import RunLoopCore

/// The fleet's health for `runloopd_fleet_instances`: how many instances
/// sharing the history store are `up`, `stopped` or `lost`, judged as
/// `/api/fleet` judges them (`Rep.health`, which leaves out this process's
/// store outage). Read from the store on the recorder's reader queue when a
/// scrape asks (never on a timer: an idle runloopd that nobody scrapes reads
/// nothing); the scrape waits for the
/// read at most `wait` seconds, else it shows the last counts read. A failed
/// read keeps the last counts (the store's own `runloopd_store_up` says it
/// is down); before the first answer the family has no samples.
final class FleetHealth: Sendable {
    static let states = ["up", "stopped", "lost"]
    /// How long a scrape waits for the store's answer.
    static let wait = 0.5

    private struct State {
        var counts: [String: Int]?
        var reading = false
        /// Scrapes waiting for the read under way.
        var waiting: [@Sendable () -> Void] = []
    }

    private let state = Locked(State())

    /// The counts as last read (nil before the first read answered).
    var counts: [String: Int]? { state.withLock { $0.counts } }

    /// Reads the fleet from `history`'s store, then calls `done` (once: when
    /// the read ends or after `wait` seconds, whichever is first).
    func refresh(_ history: HistoryRecorder, done: @escaping @Sendable () -> Void) {
        let once = ReplyOnce<Void> { _ in done() }
        once.expire(after: Self.wait) {}
        let wake: @Sendable () -> Void = { once.answer(()) }  // called after the read, outside the lock
        let startRead = state.withLock { s in
            s.waiting.append(wake)
            defer { s.reading = true }
            return !s.reading
        }
        guard startRead else { return }
        history.readers.async { [self] in
            let selfId = history.instance.id
            let beat = history.options.heartbeatInterval
            var counts: [String: Int]?
            if let instances = try? history.reading({ try $0.instances() }) {
                let now = Date().timeIntervalSince1970
                let outage = history.status.outage
                var byHealth = Dictionary(uniqueKeysWithValues: Self.states.map { ($0, 0) })
                for instance in instances {
                    let health = Rep.health(instance, selfId: selfId, now: now, beat: beat, outage: outage)
                    byHealth[health, default: 0] += 1
                }
                counts = byHealth
            }
            let waiting = state.withLock { s in
                if let counts { s.counts = counts }
                s.reading = false
                defer { s.waiting = [] }
                return s.waiting
            }
            for wake in waiting { wake() }
        }
    }
}
