import CFOracle
import Foundation

/// The plain-CF cases the claims of docs/claims.md name, played through
/// `CFOracle` (raw CF calls on a fresh thread). The few that need what the
/// oracle's setups cannot say are in ClaimOracleRawCases.swift.
extension ClaimCase {
    typealias S = ClaimSetups

    static let all: [ClaimCase] = modes + sources + timers + turns + performs + raw

    static let modes: [ClaimCase] = [
        ClaimCase(
            name: "empty-mode-finishes-at-once",
            shows: "a mode with no source or timer returns finished before entry; an observer does not count"
        ) {
            S.play(
                "empty", S.setup(keepAlive: "none", deadline: 4, observers: [S.observer(["entry", "exit"])])
            ) { run, _ in
                S.expect(run.exitReason == "finished", "not finished")
                    + S.expect(run.count("observer o0") == 0, "the entry or exit observer was called")
            }
        },
        ClaimCase(
            name: "any-source-or-timer-keeps-the-mode-alive",
            shows: "a port, a timer or a custom source (not signalled) each keeps the mode alive until the deadline"
        ) {
            S.play("port", S.setup(deadline: 2)) { run, _ in S.expect(run.exitReason == "timedOut", "not timedOut") }
                + S.play("timer", S.setup(keepAlive: "none", deadline: 2, timers: [S.timer(first: 400)])) { run, _ in
                    S.expect(run.exitReason == "timedOut", "not timedOut")
                }
                + S.play("source0", S.setup(keepAlive: "none", deadline: 2, sources: [S.source0()])) { run, _ in
                    S.expect(run.exitReason == "timedOut", "not timedOut")
                }
        },
        ClaimCase(
            name: "last-item-removed-finishes",
            shows:
                "invalidating the last timer or removing the last source, with a wake-up, finishes the run; "
                + "without one the loop sleeps on to its deadline; a one-shot timer alone finishes the run once it fired"
        ) {
            let invalidate = S.setup(
                keepAlive: "none", deadline: 3, timers: [S.timer(first: 400)],
                stimuli: [.init(slot: 1, kind: "invalidateTimer", index: 0, wakeUp: true)])
            let remove = { (wake: Bool) in
                S.setup(
                    keepAlive: "none", deadline: 3, sources: [S.port()],
                    stimuli: [.init(slot: 1, kind: "removeSource", index: 0, wakeUp: wake, keys: ["default"])])
            }
            return S.play("invalidate", invalidate) { run, _ in S.expect(run.exitReason == "finished", "not finished") }
                + S.play("remove", remove(true)) { run, _ in S.expect(run.exitReason == "finished", "not finished") }
                + S.play("remove, no wake-up", remove(false)) { run, _ in
                    S.expect(run.exitReason == "timedOut", "a removal woke the loop")
                }
                + S.play("one-shot", S.setup(keepAlive: "none", deadline: 3, timers: [S.timer(first: 1)])) { run, _ in
                    S.expect(run.exitReason == "finished" && run.count("timer t0") == 1, "not finished after its fire")
                }
        },
        ClaimCase(
            name: "one-mode-at-a-time",
            shows:
                "a run in tracking fires none of default's timers, sources or observers; a run in default fires them"
        ) {
            let items = (
                timers: [S.timer(first: 1)], sources: [S.port(["tracking"]), S.source0()],
                observers: [S.observer(["beforeWaiting"])],
                stimuli: [OracleSetup.Stimulus(slot: 2, kind: "signal", index: 1, wakeUp: true)]
            )
            let run = { (mode: String) in
                S.setup(
                    runMode: mode, deadline: 3, timers: items.timers, sources: items.sources,
                    observers: items.observers, stimuli: items.stimuli)
            }
            return S.play("tracking", run("tracking")) { run, _ in
                S.expect(run.exitReason == "timedOut", "not timedOut")
                    + S.expect(run.callouts.isEmpty, "default's items were called in a tracking run")
            }
                + S.play("default", run("default")) { run, _ in
                    S.expect(
                        run.count("timer t0") == 1 && run.count("source s1") == 1 && run.count("observer o0") > 0,
                        "default's items were not called in a default run")
                }
        },
        ClaimCase(
            name: "a-common-modes-timer-fires-in-tracking",
            shows:
                "a timer added to the common modes fires in a tracking run once tracking is a common mode, not before"
        ) {
            let run = { (common: Bool) in
                S.setup(
                    runMode: "tracking", trackingIsCommon: common, deadline: 2, timers: [S.timer(["common"], first: 1)],
                    sources: [S.port(["tracking"])])
            }
            return S.play("common", run(true)) { run, _ in S.expect(run.count("timer t0") == 1, "it did not fire") }
                + S.play("not common", run(false)) { run, _ in S.expect(run.count("timer t0") == 0, "it fired") }
        },
        ClaimCase(
            name: "runs-nest-in-any-mode",
            shows: "a callout runs the loop again, in another mode or in the outer run's own, and the outer run goes on"
        ) {
            let nest = { (mode: String) in
                S.setup(
                    deadline: 3,
                    sources: [
                        S.source0(signalled: true, action: .init(kind: "runNested", mode: mode, slots: 1)),
                        S.port(["tracking"]),
                    ])
            }
            return ["tracking", "default"].flatMap { mode in
                S.play("nested in \(mode)", nest(mode)) { run, result in
                    S.expect(result.nested.map(\.exitReason) == ["timedOut"], "nested: \(result.nested)")
                        + S.expect(run.exitReason == "timedOut", "the outer run did not go on")
                }
            }
        },
    ]
}

extension ClaimCase {
    static let sources: [ClaimCase] = [
        ClaimCase(
            name: "four-exit-reasons",
            shows:
                "CFRunLoopRunInMode returns finished (1, an empty mode), stopped (2, CFRunLoopStop), "
                + "timedOut (3, the deadline) and handledSource (4, a source with returnAfterSourceHandled)"
        ) {
            S.play("finished", S.setup(keepAlive: "none", deadline: 2)) { run, _ in
                S.expect(run.exitReason == "finished", "not finished")
            }
                + S.play("stopped", S.setup(deadline: 3, stimuli: [.init(slot: 1, kind: "stop")])) { run, _ in
                    S.expect(run.exitReason == "stopped" && run.stopper == "outside", "not stopped from outside")
                }
                + S.play("timedOut", S.setup(deadline: 2)) { run, _ in
                    S.expect(run.exitReason == "timedOut", "not timedOut")
                }
                + S.play("handledSource", S.setup(deadline: 2, rash: true, sources: [S.source0(signalled: true)])) {
                    run, _ in S.expect(run.exitReason == "handledSource", "not handledSource")
                }
        },
        ClaimCase(
            name: "stop-ends-the-run-in-mode",
            shows: "CFRunLoopStop from another thread ends the run under way, which still notifies its exit observers"
        ) {
            S.play(
                "stop",
                S.setup(deadline: 4, observers: [S.observer(["exit"])], stimuli: [.init(slot: 1, kind: "stop")])
            ) { run, _ in
                S.expect(run.exitReason == "stopped" && run.stopper == "outside", "not stopped from outside")
                    + S.expect(
                        run.turns.last?.callouts == ["observer o0"], "the exit observer was not the last callout")
            }
        },
        ClaimCase(
            name: "a-signalled-source0-ends-a-handled-source-run",
            shows: "a custom source signalled before the run ends a returnAfterSourceHandled run in its first pass"
        ) {
            S.play("source0", S.setup(deadline: 3, rash: true, sources: [S.source0(signalled: true)])) { run, _ in
                S.expect(run.exitReason == "handledSource", "not handledSource")
                    + S.expect(run.handled == ["source s0"] && run.turns.count == 1, "not in the first pass")
            }
        },
        ClaimCase(
            name: "one-source0-per-handled-source-pass",
            shows:
                "with returnAfterSourceHandled one signalled custom source runs (the lower order) and the other "
                + "stays signalled; without it both run in one turn"
        ) {
            let two = { (rash: Bool) in
                S.setup(
                    deadline: 2, rash: rash,
                    sources: [S.source0(order: 0, signalled: true), S.source0(order: 1, signalled: true)])
            }
            return S.play("returnAfterSourceHandled", two(true)) { run, _ in
                S.expect(run.handled == ["source s0"] && run.count("source s1") == 0, "not s0 alone")
            }
                + S.play("plain", two(false)) { run, _ in
                    S.expect(run.turns.first?.callouts == ["source s0", "source s1"], "not both in the first turn")
                }
        },
        ClaimCase(
            name: "signal-without-wake-up-waits",
            shows:
                "CFRunLoopSourceSignal from another thread alone leaves the sleeping loop asleep until a wake-up; "
                + "with CFRunLoopWakeUp the source runs at once"
        ) {
            let signal = { (wake: Bool) in
                S.setup(
                    deadline: 5, rash: true, sources: [S.source0()],
                    stimuli: [.init(slot: 1, kind: "signal", index: 0, wakeUp: wake)]
                        + (wake ? [] : [.init(slot: 3, kind: "wakeUp")]))
            }
            return S.play("no wake-up", signal(false)) { run, _ in
                S.expect(run.exitReason == "handledSource", "not handledSource")
                    + S.expect(run.ms >= 2.5 * 25, "it ran before the wake-up at slot 3, at \(run.ms) ms")
            }
                + S.play("with a wake-up", signal(true)) { run, _ in
                    S.expect(run.exitReason == "handledSource", "not handledSource")
                        + S.expect(run.ms < 2.5 * 25, "it waited past the signal's slot, to \(run.ms) ms")
                }
        },
        ClaimCase(
            name: "a-signal-made-in-a-callout-runs-in-the-same-turn",
            shows:
                "a custom source signalled (no wake-up) by a timer's callout runs right after it, with no sleep between"
        ) {
            S.play(
                "signal",
                S.setup(
                    deadline: 3, timers: [S.timer(first: 1, action: .init(kind: "signal", source: 0, wakeUp: false))],
                    sources: [S.source0()])
            ) { run, _ in S.expect(run.inOneTurn("timer t0", then: "source s0"), "not in one turn") }
        },
        ClaimCase(
            name: "a-port-message-wakes-the-loop",
            shows:
                "a message written from another thread to a port source's descriptor wakes the loop, whose turn "
                + "runs the port's callout and, with returnAfterSourceHandled, ends the run"
        ) {
            S.play(
                "message",
                S.setup(
                    keepAlive: "none", deadline: 3, rash: true, sources: [S.port()],
                    stimuli: [.init(slot: 1, kind: "message", index: 0)])
            ) { run, _ in
                S.expect(run.exitReason == "handledSource" && run.handled == ["port s0"], "not handled")
                    + S.expect(run.turns.last?.wokeBy == "port s0", "not woken by the port")
                    + S.expect(run.ms >= 0.5 * 25, "handled before the message's slot, at \(run.ms) ms")
            }
        },
        ClaimCase(
            name: "a-port-callback-signals-a-source0",
            shows: "a port's callout that signals a custom source has it run in the same turn (the touch pipeline)"
        ) {
            S.play(
                "pipeline",
                S.setup(
                    deadline: 3,
                    sources: [S.port(action: .init(kind: "signal", source: 1, wakeUp: false)), S.source0()],
                    stimuli: [.init(slot: 1, kind: "message", index: 0)])
            ) { run, _ in S.expect(run.inOneTurn("port s0", then: "source s1"), "not in one turn") }
        },
    ]
}
