import CFOracle
import Foundation
import Testing

/// The plain-CF oracle's lateness check (issue 38): a stimulus due during
/// the run but made only after the run returned was played late (the setup
/// is played again), not a result to judge; a stimulus whose run ended
/// before its slot, as planned, is not late.
@Suite struct OracleLateStimulusTests {
    static func setup(timerStop: Bool) -> OracleSetup {
        let stopper = OracleSetup.Timer(
            modes: ["default"], firstSlot: 1, intervalSlots: nil, maxFires: nil, invalidated: false,
            action: .init(kind: "stop"))
        return OracleSetup(
            quantum: 0.025, keepAlive: "port", runMode: "default", trackingIsCommon: false, startSlot: 0,
            deadlineSlot: 3, returnAfterSourceHandled: false, nested: false, timers: timerStop ? [stopper] : [],
            sources: [], performs: [], observers: [], stimuli: [.init(slot: 2, kind: "stop")])
    }

    /// The stop (slot 2 of 3) is made only once the run has returned: the
    /// thread making it stands in for one held off the CPU past the deadline.
    @Test func aStopMadeAfterItsRunEndedIsLate() {
        let result = CFOracle.play(Self.setup(timerStop: false)) { waitForRunEnd in waitForRunEnd() }
        #expect(result.run.exitReason == "timedOut")
        #expect(result.lateMs > 8, "judged as played on time: \(result.lateMs) ms")
    }

    /// The timer's stop ends the run at slot 1, before the stop due at slot
    /// 2: that stop is never made, and the play is on time.
    @Test func aStopAfterItsRunEndedAsPlannedIsNotLate() {
        var onTime: [OracleResult] = []
        // Up to 30 plays (each under 0.1 s): with two CPU hogs per core
        // beside it, five were all late once.
        for _ in 0..<30 where onTime.isEmpty {
            let result = CFOracle.play(Self.setup(timerStop: true))
            if result.lateMs <= 8 { onTime.append(result) }
        }
        #expect(onTime.count == 1, "never played on time in 30 attempts")
        for result in onTime {
            #expect(result.run.exitReason == "stopped" && result.run.stopper == "timer t0", "\(result.run)")
        }
    }
}
