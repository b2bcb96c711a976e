import RunLoopStore
import Testing

@testable import RunLoopServer

/// How one instance judges another's health (`GET /api/fleet`): silence
/// counts only while the store answered the judge.
@Suite("Fleet health")
struct FleetHealthTests {
    static func other(beat: Double, stopped: Double? = nil) -> InstanceRecord {
        InstanceRecord(
            id: "b", url: "", version: "", host: "", pid: 1, startedAt: 0, heartbeatAt: beat, stoppedAt: stopped)
    }

    static func health(_ i: InstanceRecord, now: Double, outage: (Double, Double?)? = nil) -> String {
        Rep.health(i, selfId: "a", now: now, beat: 5, outage: outage.map { (from: $0.0, to: $0.1) })
    }

    @Test("lost after 3 silent intervals while the store answered; a clean stop is stopped; self is up")
    func plain() {
        #expect(Self.health(Self.other(beat: 100), now: 115) == "up")
        #expect(Self.health(Self.other(beat: 100), now: 115.5) == "lost")
        #expect(Self.health(Self.other(beat: 100, stopped: 101), now: 1_000) == "stopped")
        #expect(Rep.health(Self.other(beat: 0), selfId: "b", now: 1_000, beat: 5, outage: nil) == "up")
    }

    @Test("an outage of the store for the judge does not count: no lost while the other still backs off")
    func outage() {
        // The store was down 100...160 for the judge; b beat last at 98 and is
        // still backing off one second after the store came back.
        let b = Self.other(beat: 98)
        #expect(Self.health(b, now: 161, outage: (100, 160)) == "up")
        // With a short interval it still has the writer's longest back-off (5 s) on top.
        let quick = Self.other(beat: 99.9)
        #expect(Rep.health(quick, selfId: "a", now: 165, beat: 0.5, outage: (from: 100, to: 160)) == "up")
        #expect(Rep.health(quick, selfId: "a", now: 166.6, beat: 0.5, outage: (from: 100, to: 160)) == "lost")
        // It had 3 intervals after the outage (and the back-off) to beat again and did not: lost.
        // (2 s before the outage, 12.5 s after it and the back-off.)
        #expect(Self.health(b, now: 177.5, outage: (100, 160)) == "up")
        #expect(Self.health(b, now: 178.5, outage: (100, 160)) == "lost")
        // One that was already silent long before the outage stays lost through it.
        #expect(Self.health(Self.other(beat: 50), now: 161, outage: (100, 160)) == "lost")
        // While the outage lasts nothing more is counted against it.
        #expect(Self.health(b, now: 500, outage: (100, nil)) == "up")
        // An old outage, before its last heartbeat, changes nothing.
        #expect(Self.health(Self.other(beat: 200), now: 216, outage: (100, 160)) == "lost")
    }
}
