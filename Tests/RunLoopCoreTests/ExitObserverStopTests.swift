import Foundation
import Testing

@testable import RunLoopCore

/// D3 of issue 38, its exact set-up: a one-shot timer's `stop` ends the
/// run; an `exit` observer calls `stop` too. Exit observers run after CF
/// has decided to return, so their stop cannot be the cause: the run's
/// cause names the timer (on 1a429af it named the observer).
@Suite struct ExitObserverStopTests {
    @Test func anExitObserversStopIsNotBlamedForTheTimersStop() throws {
        let registry = WorkerRegistry(limits: Limits())
        let worker = try registry.createWorker(
            WorkerOptions(keepAlive: .port, policy: RunPolicy(style: .manual)))
        defer { worker.endAndWait(timeout: 10) }
        let timer = try worker.addTimer(
            TimerSpec(
                interval: 0.05, repeats: false, delay: 0.05, mode: .default, action: SelectorCall(selector: "stop"))
        ).id
        let observer = try worker.addObserver(
            ObserverSpec(activities: [.exit], repeats: true, mode: .default, action: SelectorCall(selector: "stop"))
        ).id
        let exit = try worker.runAndWait(seconds: 2)
        #expect(exit.reason == .stopped)
        #expect(exit.cause?.code == "stop_selector", "\(String(describing: exit.cause))")
        let by = exit.cause?.details["by"]
        #expect(by == ["kind": "timer", "id": .string(timer)], "blamed \(String(describing: by)), not \(observer)")
    }
}
