import CoreFoundation
import Foundation
import Testing

@testable import RunLoopCore

#if canImport(Glibc)
    import Glibc
#endif

/// Custom (source0) and port (source1) sources.
@Suite struct SourceTests {
    @Test func signalAndWakeUpMakesAReturnAfterSourceHandledRunReturn() throws {
        let (registry, probe) = makeRegistry()
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.manual))
        let source = try worker.addSource(SourceSpec(kind: .custom))
        #expect(source.scheduled == 1, "the schedule routine ran when the source was added")

        let run = try worker.startRun(seconds: 10, returnAfterSourceHandled: true)
        #expect(probe.waitUntil { worker.snapshot.state == .waiting })
        _ = try worker.signalSource(source.id, wakeUp: true)
        let exit = try #require(run.wait(15)).get()

        #expect(exit.reason == .handledSource)
        #expect(exit.duration < 8)
        let after = try #require(worker.userSources().first)
        #expect(after.fired == 1)
        #expect(!after.signalled)
    }

    @Test func signalWithoutWakeUpWaitsForTheNextRun() throws {
        let (registry, probe) = makeRegistry()
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.manual))
        let source = try worker.addSource(SourceSpec(kind: .custom))

        let run = try worker.startRun(seconds: 0.3, returnAfterSourceHandled: true)
        #expect(probe.waitUntil { worker.snapshot.state == .waiting })
        _ = try worker.signalSource(source.id, wakeUp: false)
        let first = try #require(run.wait(15)).get()

        #expect(first.reason == .timedOut, "nobody woke the loop: the signalled source waited")
        let waiting = try #require(worker.userSources().first)
        #expect(waiting.fired == 0)
        #expect(waiting.signalled)

        let second = try worker.runAndWait(seconds: 10, returnAfterSourceHandled: true)
        #expect(second.reason == .handledSource, "the next run handles it at once")
        #expect(second.duration < 5)
        #expect(worker.userSources().first?.fired == 1)
    }

    @Test func invalidatingACustomSourceRunsItsCancelRoutine() throws {
        try withWorker(options(.manual, keepAlive: .none)) { worker in
            let source = try worker.addSource(SourceSpec(kind: .custom, action: SelectorCall(selector: "count")))

            _ = try worker.signalSource(source.id, wakeUp: false)
            let handled = try worker.runAndWait(seconds: 5, returnAfterSourceHandled: true)
            #expect(handled.reason == .handledSource)
            #expect(worker.counterValues["default"] == 1, "the source's action ran")

            let invalidated = try worker.invalidateSource(source.id)
            #expect(!invalidated.valid)
            #expect(invalidated.cancelled == 1)
            #expect(runLoopError { _ = try worker.signalSource(source.id, wakeUp: true) }?.code == "source_invalid")
            // The source was the mode's only item.
            #expect(try worker.runAndWait(seconds: 5).reason == .finished)
        }
    }

    @Test func portMessageBetweenTwoWorkers() throws {
        let (registry, probe) = makeRegistry()
        defer { registry.endAll() }
        let sender = try registry.createWorker(options(.loop))
        let receiver = try registry.createWorker(options(.loop))
        let port = try receiver.addSource(SourceSpec(kind: .port))
        let fd = try #require(port.fd)

        let sent = try sender.performCall(
            "send", ["thread": .string(receiver.id), "source": .string(port.id), "msgid": 7, "data": "hello"])
        let reply = try value(sent.result).object ?? [:]
        #expect(reply["thread"] == .string(receiver.id))

        #expect(probe.waitUntil { receiver.userSources().first?.received == 1 })
        let after = try #require(receiver.userSources().first)
        #expect(after.fired >= 1)
        #expect(after.queued == 0)
        let message = try #require(after.recentMessages.last)
        #expect(message.msgid == 7)
        #expect(message.data == "hello")
        #expect(message.receivedAt != nil)
        // The event is emitted after the message is counted (once the source's
        // action ran): wait for it rather than race it.
        func sourceEvents() -> [RunLoopEvent] {
            probe.events.filter {
                guard case .source(let thread, let source, let kind, _, _) = $0 else { return false }
                return thread == receiver.id && source == port.id && kind == .port
            }
        }
        #expect(probe.waitUntil { !sourceEvents().isEmpty })
        // CF read the doorbell before perform: the eventfd is drained.
        var counter: UInt64 = 0
        let got = read(fd, &counter, 8)
        #expect(got == -1 && errno == EAGAIN, "eventfd still held \(counter)")

        // A burst: every message arrives, possibly in fewer perform calls.
        for msgid in 1...5 {
            _ = try sender.performCall(
                "send", ["thread": .string(receiver.id), "source": .string(port.id), "msgid": .number(Double(msgid))])
        }
        #expect(probe.waitUntil { receiver.userSources().first?.received == 6 })
        let burst = try #require(receiver.userSources().first)
        #expect(burst.fired <= 6)
        #expect(burst.recentMessages.suffix(5).map(\.msgid) == [1, 2, 3, 4, 5])
    }

    @Test func portSourceInAModeTheLoopIsNotInHoldsItsMessages() throws {
        let (registry, probe) = makeRegistry()
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.manual))
        let other = try RunLoopMode("other")
        let port = try worker.addSource(SourceSpec(kind: .port, mode: other))

        _ = try worker.sendMessage(toSource: port.id, msgid: 1, data: "x")
        #expect(try worker.runAndWait(seconds: 0.1).reason == .timedOut)
        #expect(worker.userSources().first?.queued == 1)

        let exit = try worker.runAndWait(other, seconds: 10, returnAfterSourceHandled: true)
        #expect(exit.reason == .handledSource, "a port source counts as a handled source")
        #expect(probe.waitUntil { worker.userSources().first?.received == 1 })
        #expect(runLoopError { _ = try worker.signalSource(port.id, wakeUp: true) }?.code == "wrong_kind")
    }
}
