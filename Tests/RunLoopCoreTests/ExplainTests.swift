import CoreFoundation
import Foundation
import RunLoopTestSupport
import Testing

@testable import RunLoopCore
@testable import RunLoopModel

/// The explainer through RunLoopCore's public API (no HTTP): causes, turns,
/// load, warnings and stalls are there for programs that embed the engine.
@Suite struct ExplainTests {
    @Test func timedOutRunWithTimerFiresSaysTimersNeverCount() throws {
        try withWorker(options(.manual)) { worker in
            _ = try worker.addTimer(TimerSpec(interval: 0.05))
            let exit = try worker.runAndWait(seconds: 0.4, returnAfterSourceHandled: true)

            #expect(exit.reason == .timedOut)
            let cause = try #require(exit.cause)
            #expect(cause.code == "deadline")
            #expect((cause.details["timerFires"]?.integer ?? 0) >= 1)
            #expect(cause.message.contains("timers never count as handled sources"))
            // The turns of that run: the first one (none), then timer wakes, the last one the deadline.
            let turns = worker.turns(since: 0).turns.filter { $0.run == exit.run }
            #expect(turns.first?.wokeBy.kind == WakeKind.none)
            #expect(turns.contains { $0.wokeBy.kind == .timer && $0.callouts.contains { $0.ref.kind == .timer } })
            #expect(turns.last?.end == .exit)
            let load = worker.load()
            #expect(load.stats.turns >= turns.count)
            #expect(load.stats.dispatch.count >= 1)
        }
    }

    @Test func aUserObserverAtAfterWaitingDoesNotHideWhatWokeTheTurn() throws {
        try withWorker(options(.manual)) { worker in
            // All activities, order 0: it runs before the timer's callout on every wake.
            _ = try worker.addObserver(ObserverSpec(mode: .default))
            _ = try worker.addTimer(TimerSpec(interval: 0.05))
            let exit = try worker.runAndWait(seconds: 0.3)
            let woken = worker.turns(since: 0).turns.filter { $0.run == exit.run && $0.wokeBy.kind != WakeKind.none }
            let timerTurns = woken.filter { $0.callouts.contains { $0.ref.kind == .timer } }
            #expect(!timerTurns.isEmpty)
            #expect(timerTurns.allSatisfy { $0.wokeBy.kind == .timer }, "\(timerTurns.map(\.wokeBy))")
            // The observer's callouts are filed in the turns too.
            #expect(timerTurns.allSatisfy { $0.callouts.contains { $0.ref.kind == .observer } })
        }
    }

    @Test func aFourHundredMillisecondSelectorIsExactlyOneStallEndingAsHang() throws {
        let (registry, probe) = makeRegistry()
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.loop))
        let done = Mailbox<PerformResult>()
        try worker.perform(
            PerformSpec(call: SelectorCall(selector: "sleep", args: ["ms": 400]), modes: [.default])
        ) { done.put($0) }
        #expect(done.wait() != nil)
        #expect(
            probe.waitUntil {
                probe.events.contains { if case .stallEnded = $0 { return true } else { return false } }
            })
        let stalls = probe.events.compactMap { event -> (Stall, StallChange?)? in
            switch event {
            case .stall(let stall, let change): return (stall, change)
            case .stallEnded(let stall): return (stall, nil)
            default: return nil
            }
        }
        #expect(Set(stalls.map(\.0.id)).count == 1, "one stall, however many thresholds it crossed")
        #expect(stalls.first?.1 == .began)
        let ended = try #require(stalls.last { $0.1 == nil }?.0)
        #expect(ended.severity == "hang")
        #expect(ended.ms >= 390)
        #expect(ended.callout.kind == .perform && ended.callout.selector == "sleep")
        let warning = try #require(worker.warnings().first { $0.code == "stall" })
        #expect(warning.severity == "hang" && warning.count == 1 && !warning.active)
    }

    @Test func stopFromAnotherThreadNamesItsOrigin() throws {
        try withWorker(options(.manual)) { worker in
            let exit = Mailbox<RunExit>()
            try worker.run(mode: .default, seconds: 30, returnAfterSourceHandled: false) {
                if case .success(let value) = $0 { exit.put(value) }
            }
            #expect(waitUntil(timeout: 10) { worker.snapshot.state == .waiting })
            worker.stop(origin: .request(by: "a test", requestId: "q1")) { _ in }
            let cause = try #require(exit.wait()?.cause)
            #expect(cause.code == "stop_request")
            #expect(cause.details["by"] == .string("a test") && cause.details["requestId"] == .string("q1"))
        }
    }

    @Test func whyNamesTheKeepAlivePortAndAnEmptyMode() throws {
        try withWorker(options(.manual)) { worker in
            let why = worker.why()
            let modes = Dictionary(uniqueKeysWithValues: why.modes.map { ($0.mode, $0) })
            #expect(modes["default"]?.ports.first?.keepAlive == true)
            #expect(modes["default"]?.verdict.contains("keep-alive port") == true)
            #expect(why.verdict.contains("manual"))
        }
    }

    /// A message queued on the keep-alive port of a manual thread not
    /// running: the run handles it first, then sleeps. Neither text may say
    /// the run only sleeps, nor that nothing holds a message before it ran.
    @Test func aQueuedMessageIsTheNextTurnsWorkNotNothing() throws {
        try withWorker(options(.manual)) { worker in
            let port = try #require(worker.why().modes.first { $0.mode == "default" }?.ports.first?.id)
            _ = try worker.sendMessage(toSource: port, msgid: 1, data: "hi")
            let mode = try #require(worker.why().modes.first { $0.mode == "default" })
            #expect(
                mode.verdict.hasPrefix("a run in default handles port \(port) (a message queued) on its next turn"),
                "\(mode.verdict)")
            let last = mode.prediction?.reasons.last ?? ""
            #expect(last.hasPrefix("once port \(port) ran, nothing in default is due"), "\(last)")
        }
    }

    /// Names close to CF's or Cocoa's get a suggestion; others, and the real
    /// names, none.
    @Test func modeNamesCloseToKnownOnesGetASuggestion() throws {
        let close = [
            "NSDefaultRunloopMode": "default", "kCFRunLoopDefault": "default", "defualt": "default",
            "Default": "default", "DEFAULT": "default", "kCFRunLoopDefaultMod": "default",
            "NSRunLoopCommonMode": "common", "kCFRunLoopCommonMode": "common", "comon": "common",
            "Common": "common",
        ]
        for (name, meant) in close {
            let mode = try RunLoopMode(name)
            #expect(mode.suggestion == meant, "\(name)")
            #expect(mode.hint?.contains("did you mean \(meant)") == true, "\(name)")
        }
        for name in ["tracking", "UITrackingRunLoopMode", "comment", "delete", "modal", "x"] {
            #expect(try RunLoopMode(name).suggestion == nil, "\(name)")
        }
        for name in ["default", "common", "NSDefaultRunLoopMode", "kCFRunLoopCommonModes"] {
            #expect(try RunLoopMode(name).hint == nil, "\(name) is a known mode")
        }
        #expect(RunLoopMode.editDistance("defualt", "default", limit: 2) == 1)
        #expect(RunLoopMode.editDistance("abc", "xyz", limit: 2) == 3)
    }

    /// A late repeating timer: its lateness and its `timer_behind` warning are
    /// one number, measured from the fire date CF had set (not from the
    /// latest grid point, which hid the skipped fires).
    @Test func latenessAndTimerBehindAreMeasuredFromTheSamePoint() throws {
        try withWorker(options(.manual)) { worker in
            let timer = try worker.addTimer(TimerSpec(interval: 0.05, repeats: true, maxFires: 1))
            // Another mode with something in it, so the run there lasts.
            _ = try worker.addSource(SourceSpec(kind: .custom, mode: try RunLoopMode("elsewhere")))
            #expect(try worker.runAndWait(try RunLoopMode("elsewhere"), seconds: 0.3).reason == .timedOut)
            #expect(try worker.runAndWait(seconds: 0.12).reason == .timedOut)
            let snapshot = try worker.timerSnapshot(timer.id)
            let maxMs = try #require(snapshot.lateness.maxMs)
            // Due 0.05 s after creation, it could fire only once the default run began, 0.3 s later.
            #expect(maxMs >= 240, "lateness counts from the missed fire date: \(maxMs) ms")
            let warning = try #require(worker.warnings().first { $0.code == "timer_behind" })
            #expect(warning.details["latenessMs"]?.number == maxMs)
            #expect(warning.details["behindMs"]?.number == maxMs.rounded())
        }
    }
}
