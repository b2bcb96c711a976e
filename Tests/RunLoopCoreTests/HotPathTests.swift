import CoreFoundation
import Foundation
import Primitives
import Testing

@testable import RunLoopCore
import RunLoopTestSupport

/// The pieces the HTTP hop leans on under load: coalesced wake-ups of a
/// command source and cancellable deadlines. Serialized: two of them time
/// the process-wide deadlines.
@Suite(.serialized) struct HotPathTests {
    @Test func coalescingSourceWakesOncePerBurstAndLosesNothing() throws {
        try withWorker(options(.loop, seconds: 30)) { worker in
            let gate = DispatchSemaphore(value: 0)
            let entered = DispatchSemaphore(value: 0)
            let received = Mailbox<[Int]>()
            let source = CommandSource<Int>(coalescingWakeUps: true) { batch in
                if batch == [0] {  // hold the loop while the burst queues up
                    entered.signal()
                    gate.wait()
                }
                received.put(batch)
            }
            source.add(to: worker.runLoop, mode: .default)
            defer { source.invalidate() }

            #expect(source.send(0, to: worker.runLoop))
            #expect(entered.wait(timeout: .now() + 10) == .success, "the loop is inside the first batch")
            for command in 1...100 { #expect(source.send(command, to: worker.runLoop)) }
            gate.signal()

            let batches = received.wait(count: 2)
            #expect(batches.first == [0])
            #expect(batches.last == Array(1...100), "the burst arrives as one batch, in order")
            let stats = source.statistics
            #expect(stats.coalesced == 99, "only the first send after a drain signals and wakes")
            #expect(stats.commands == 101)
            #expect(stats.largestBatch == 100)

            // After a drain the next send wakes the loop again.
            #expect(source.send(101, to: worker.runLoop))
            #expect(received.wait(count: 3).last == [101])
            #expect(source.statistics.coalesced == 99)
        }
    }

    /// A wake-up spent on a mode the loop is not in must not make the next
    /// send skip its own once the source has moved to the mode the loop runs.
    @Test func coalescingSourceMovedBetweenModesStillWakesTheLoop() throws {
        let (registry, probe) = makeRegistry()
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.loop, seconds: 30))
        let other = try RunLoopMode("elsewhere")
        let received = Mailbox<[Int]>()
        let source = CommandSource<Int>(coalescingWakeUps: true) { received.put($0) }
        defer { source.invalidate() }
        source.add(to: worker.runLoop, mode: other)
        #expect(source.send(1, to: worker.runLoop))
        #expect(probe.waitUntil { worker.snapshot.state == .waiting })
        #expect(received.all.isEmpty, "the loop runs default, not elsewhere")

        source.remove(from: worker.runLoop, mode: other)
        source.add(to: worker.runLoop, mode: .default)
        #expect(source.send(2, to: worker.runLoop))
        #expect(received.wait() == [1, 2], "the second send woke the sleeping loop")
    }

    @Test func plainSourceStillFiresEverySend() throws {
        try withWorker(options(.loop, seconds: 30)) { worker in
            let received = Mailbox<[Int]>()
            let source = CommandSource<Int> { received.put($0) }
            source.add(to: worker.runLoop, mode: .default)
            defer { source.invalidate() }
            for command in 0..<10 {
                #expect(source.send(command, to: worker.runLoop))
                #expect(received.wait(count: command + 1).last == [command])
            }
            #expect(source.statistics.performs == 10)
            #expect(source.statistics.coalesced == 0)
        }
    }

    @Test func deadlinesFireInOrderAndCancelledOnesNeverRunAndAreReleased() throws {
        final class Marker: Sendable {}
        let fired = Mailbox<String>()
        weak var released: Marker?
        let cancelled: DeadlineToken
        do {
            let marker = Marker()
            released = marker
            // Deadlines far apart (hundreds of ms): a loaded machine can stall a thread
            // for tens of ms between two lines, and a 20 ms deadline once fired before
            // the line that cancels it.
            cancelled = Deadlines.after(0.3) { [marker] in
                _ = marker
                fired.put("cancelled")
            }
        }
        Deadlines.after(0.6) { fired.put("late") }
        Deadlines.after(0.1) { fired.put("early") }
        Deadlines.after(0.4) { fired.put("middle") }
        #expect(released != nil, "the scheduled action holds what it captured")
        cancelled.cancel()
        #expect(released == nil, "cancel releases the action at once, not at its deadline")

        #expect(fired.wait(count: 3) == ["early", "middle", "late"])
        #expect(fired.wait(count: 4, 0.1).count == 3, "the cancelled deadline never ran")
    }

    @Test func manyCancelledDeadlinesLeaveNothingBehind() throws {
        final class Marker: Sendable {}
        weak var released: Marker?
        var tokens: [DeadlineToken] = []
        do {
            let marker = Marker()
            released = marker
            tokens = (0..<10_000).map { index in Deadlines.after(30 + Double(index) / 1000) { _ = marker } }
        }
        #expect(released != nil)
        for token in tokens { token.cancel() }
        #expect(released == nil, "all 10,000 actions were released by their cancels")
        // A deadline scheduled after the churn still fires, on time.
        let fired = Mailbox<Bool>()
        Deadlines.after(0.01) { fired.put(true) }
        #expect(fired.wait() == true)
    }

    @Test func performWithTimeoutCancelsItsDeadlineWhenAnswered() throws {
        // Measured on what each perform's answer captures, not on the
        // process-wide `Deadlines.shared.pendingCount`, which every suite
        // running in parallel changes. A guard holds its perform's reply, and
        // so the answer's closure and this marker, until its deadline (600 s):
        // a marker freed while the test waits is a guard that was cancelled.
        final class Marker: Sendable {
            let freed: Mailbox<Bool>
            init(_ freed: Mailbox<Bool>) { self.freed = freed }
            deinit { freed.put(true) }
        }
        let freed = Mailbox<Bool>()
        try withWorker(options(.loop, seconds: 30)) { worker in
            for _ in 0..<50 {
                let done = Mailbox<PerformResult>()
                let marker = Marker(freed)
                try worker.perform(PerformSpec(call: SelectorCall(selector: "echo")), deadline: .caller(600)) {
                    _ = marker
                    done.put($0)
                }
                _ = try value(done)
            }
            #expect(
                freed.prefix(50, timeout: 60).count == 50, "no 600 s guard outlives its answered perform")
        }
    }
}
