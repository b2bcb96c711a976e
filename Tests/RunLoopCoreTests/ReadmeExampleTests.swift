import Foundation
import Testing

import RunLoopCore

/// The in-process example of Sources/RunLoopCore/README.md, compiled and run.
@Suite struct ReadmeExampleTests {
    @Test func readmeExample() throws {
        // --- README example begins ---
        let registry = WorkerRegistry()  // limits, selectors, an optional event sink
        let worker = try registry.createWorker(
            WorkerOptions(name: "demo", keepAlive: .port, policy: RunPolicy(style: .loop, seconds: 1)))

        let answered = DispatchSemaphore(value: 0)
        try worker.perform(PerformSpec(call: SelectorCall(selector: "count", args: ["by": 2]))) { result in
            print(result.outcome)  // success(["name": "default", "value": 2]), run on the worker's thread
            answered.signal()
        }
        answered.wait()

        worker.stop { print($0) }  // success(RunExit(reason: .stopped, …)); a loop worker re-enters
        if let final = worker.endAndWait() {  // cancel + stop + join, then the last snapshot
            print(final.state, final.exits)  // exited [stopped: 2]
        }
        // --- README example ends ---

        #expect(worker.hasExited)
        #expect(worker.snapshot.state == .exited)
        #expect(worker.counterValues["default"] == 2)
    }
}
