import CFOracle
import Foundation

/// The plain-CF cases of timers, a turn's order and performs (ClaimOracleCatalogue.swift).
extension ClaimCase {
    static let timers: [ClaimCase] = [
        ClaimCase(
            name: "timers-never-end-a-handled-source-run",
            shows: "a repeating timer's fires never end a returnAfterSourceHandled run: it times out"
        ) {
            S.play(
                "timer", S.setup(keepAlive: "none", deadline: 4, rash: true, timers: [S.timer(first: 1, every: 2)])
            ) { run, _ in
                S.expect(run.exitReason == "timedOut", "not timedOut")
                    + S.expect(run.count("timer t0") == 2, "not 2 fires")
            }
        },
        ClaimCase(
            name: "a-late-timer-fires-once-then-on-its-grid",
            shows:
                "a repeating timer whose fire dates passed while no run watched its mode fires once, then at the "
                + "next point of its own grid (slots 1, 3 missed; fires at 4, then 5 and 7)"
        ) {
            S.play(
                "late", S.setup(startSlot: 4, deadline: 8, timers: [S.timer(first: 1, every: 2)])
            ) { run, _ in
                S.expect(run.count("timer t0") == 3, "\(run.count("timer t0")) fires, not 3")
                    + S.expect(run.exitReason == "timedOut", "not timedOut")
            }
        },
        ClaimCase(
            name: "a-timer-due-during-a-handler-fires-right-after-it",
            shows:
                "a timer that comes due while a source's callout runs (here a nested run in another mode) fires "
                + "right after the callout, in the same turn"
        ) {
            // The timer is a delayed perform's (a one-shot timer): a setup's
            // own timer fired a slot late would mark the play late.
            S.play(
                "handler",
                S.setup(
                    deadline: 4,
                    sources: [
                        S.source0(signalled: true, action: .init(kind: "runNested", mode: "tracking", slots: 2)),
                        S.port(["tracking"]),
                    ],
                    performs: [S.perform(delay: 1)])
            ) { run, result in
                S.expect(result.nested.map(\.exitReason) == ["timedOut"], "the handler's nested run: \(result.nested)")
                    + S.expect(run.inOneTurn("source s0", then: "perform p0"), "not in one turn")
            }
        },
    ]

    static let turns: [ClaimCase] = [
        ClaimCase(
            name: "observer-order-in-one-turn",
            shows:
                "entry, beforeTimers (a one-shot observer once), beforeSources, beforeWaiting; afterWaiting, the "
                + "timer, then beforeTimers again; the timeout's afterWaiting and exit"
        ) {
            let observers = [
                S.observer(["entry"]), S.observer(["beforeTimers"]), S.observer(["beforeSources"]),
                S.observer(["beforeWaiting"]), S.observer(["afterWaiting"]), S.observer(["exit"]),
                S.observer(["beforeTimers"], repeats: false, order: 1),
            ]
            return S.play("order", S.setup(deadline: 2, timers: [S.timer(first: 1)], observers: observers)) { run, _ in
                let expected: [[String]] = [
                    ["o0", "o1", "o6", "o2", "o3"], ["o4", "timer t0", "o1", "o2", "o3"], ["o4", "o5"],
                ].map { $0.map { $0.hasPrefix("o") ? "observer \($0)" : $0 } }
                return S.expect(run.turns.map(\.callouts) == expected, "turns \(run.turns.map(\.callouts))")
                    + S.expect(run.turns.map(\.wokeBy) == ["none", "timer t0", "timeout"], "woken by \(run.turns)")
            }
        },
        ClaimCase(
            name: "a-bare-wake-up-goes-back-to-before-timers",
            shows:
                "CFRunLoopWakeUp with nothing to do: afterWaiting, then beforeTimers of the next pass, and sleep again"
        ) {
            S.play(
                "wake-up",
                S.setup(
                    deadline: 2, observers: [S.observer(["beforeTimers"]), S.observer(["afterWaiting"])],
                    stimuli: [.init(slot: 1, kind: "wakeUp")])
            ) { run, _ in
                S.expect(
                    run.turns.map(\.callouts) == [["observer o0"], ["observer o1", "observer o0"], ["observer o1"]],
                    "turns \(run.turns.map(\.callouts))")
                    + S.expect(run.turns.map(\.wokeBy) == ["none", "wakeup", "timeout"], "woken by \(run.turns)")
            }
        },
        ClaimCase(
            name: "a-port-message-still-goes-through-the-sleep",
            shows:
                "a port holding a message when the pass begins is handled only after beforeWaiting and "
                + "afterWaiting; a signalled custom source runs with no sleep"
        ) {
            let observers = [S.observer(["beforeWaiting"]), S.observer(["afterWaiting"])]
            return S.play(
                "port",
                S.setup(
                    keepAlive: "none", deadline: 3, rash: true, sources: [S.port(messages: 1)], observers: observers)
            ) { run, _ in
                S.expect(
                    run.turns.map(\.callouts) == [["observer o0"], ["observer o1", "port s0"]],
                    "turns \(run.turns.map(\.callouts))")
            }
                + S.play(
                    "source0",
                    S.setup(
                        keepAlive: "none", deadline: 3, rash: true, sources: [S.source0(signalled: true)],
                        observers: observers)
                ) { run, _ in
                    S.expect(run.turns.map(\.callouts) == [["source s0"]], "turns \(run.turns.map(\.callouts))")
                }
        },
    ]

    static let performs: [ClaimCase] = [
        ClaimCase(
            name: "queued-performs-run-in-one-pass",
            shows:
                "three performs queued on the loop's perform source run in one callout, in order, as one handled source"
        ) {
            S.play("three", S.setup(deadline: 3, rash: true, performs: [S.perform(), S.perform(), S.perform()])) {
                run, _ in
                S.expect(run.handled == ["perform p0", "perform p1", "perform p2"], "handled \(run.handled)")
            }
        },
        ClaimCase(
            name: "a-perform-queued-during-a-run-wakes-it",
            shows:
                "a perform queued from another thread while the loop sleeps (its mode's version-0 source signalled, "
                + "the loop woken) runs at once, and ends a returnAfterSourceHandled run as a handled source"
        ) {
            S.play("perform", S.setup(deadline: 3, rash: true, stimuli: [.init(slot: 1, kind: "perform")])) { run, _ in
                S.expect(run.exitReason == "handledSource" && run.handled == ["perform x0"], "not handled")
                    + S.expect(run.ms >= 0.5 * 25 && run.ms < 2.5 * 25, "not at the perform's slot: \(run.ms) ms")
            }
        },
        ClaimCase(
            name: "a-perform-source-leaves-the-mode",
            shows: "once its performs ran, the perform source leaves the mode: a mode it alone held finishes"
        ) {
            S.play("alone", S.setup(keepAlive: "none", deadline: 3, performs: [S.perform()])) { run, _ in
                S.expect(run.exitReason == "finished" && run.count("perform p0") == 1, "not finished after the perform")
            }
        },
        ClaimCase(
            name: "a-delayed-perform-is-a-timer",
            shows:
                "a delayed perform fires from a timer at its date, inside a run, never as a handled source; "
                + "cancelled (invalidated), it never runs"
        ) {
            S.play(
                "delayed",
                S.setup(deadline: 3, rash: true, performs: [S.perform(delay: 1), S.perform(delay: 2, cancelled: true)])
            ) { run, _ in
                S.expect(run.exitReason == "timedOut", "not timedOut")
                    + S.expect(run.count("perform p0") == 1 && run.count("perform p1") == 0, "callouts \(run.callouts)")
            }
        },
    ]
}
