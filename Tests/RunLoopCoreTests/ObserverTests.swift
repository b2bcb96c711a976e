import CoreFoundation
import Foundation
import Testing

@testable import RunLoopCore

/// Observer order for one loop turn, once-only observers and the activity ring.
@Suite struct ObserverTests {
    @Test func orderForOneTurnThatHandlesAPreSignalledSource() throws {
        try withWorker(options(.manual)) { worker in
            let source = try worker.addSource(SourceSpec(kind: .custom))
            _ = try worker.signalSource(source.id, wakeUp: false)
            _ = try worker.addObserver(ObserverSpec(mode: .default))

            let exit = try worker.runAndWait(seconds: 10, returnAfterSourceHandled: true)

            #expect(exit.reason == .handledSource)
            #expect(worker.activityNames == [.entry, .beforeTimers, .beforeSources, .exit])
            #expect(worker.activities().allSatisfy { $0.mode == "default" })
            let seqs = worker.activities().map(\.seq)
            #expect(seqs == seqs.sorted())
        }
    }

    @Test func orderForATurnThatSleepsFirst() throws {
        let (registry, probe) = makeRegistry()
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.manual))
        let source = try worker.addSource(SourceSpec(kind: .custom))
        _ = try worker.addObserver(ObserverSpec(mode: .default))

        let run = try worker.startRun(seconds: 10, returnAfterSourceHandled: true)
        #expect(probe.waitUntil { worker.activityNames.contains(.beforeWaiting) })
        _ = try worker.signalSource(source.id, wakeUp: true)
        let exit = try #require(run.wait(15)).get()

        #expect(exit.reason == .handledSource)
        #expect(
            worker.activityNames == [
                .entry, .beforeTimers, .beforeSources, .beforeWaiting, .afterWaiting, .beforeTimers,
                .beforeSources, .exit,
            ])
    }

    @Test func timersFireAfterAfterWaiting() throws {
        let (registry, probe) = makeRegistry()
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.manual, keepAlive: .none))
        _ = try worker.addObserver(ObserverSpec(mode: .default))
        _ = try worker.addTimer(TimerSpec(interval: 0.05, repeats: false))

        let exit = try worker.runAndWait(seconds: 10)

        #expect(exit.reason == .finished)
        #expect(probe.waitUntil { worker.timerSnapshots().first?.fires == 1 })
        let names = worker.activityNames
        #expect(names.first == .entry)
        #expect(names.last == .exit)
        #expect(names.contains(.beforeWaiting))
        #expect(names.contains(.afterWaiting))
        // The timer event sits after the last afterWaiting observer callout.
        let events = probe.events
        let timerIndex = try #require(
            events.firstIndex {
                if case .timer = $0 { return true }
                return false
            })
        let wokeIndex = try #require(
            events.lastIndex {
                if case .activity(_, let record) = $0 { return record.activity == .afterWaiting }
                return false
            })
        #expect(wokeIndex < timerIndex)
    }

    @Test func aOnceObserverFiresOnceAndIsInvalidated() throws {
        try withWorker(options(.manual)) { worker in
            let observer = try worker.addObserver(ObserverSpec(activities: [.entry, .exit], repeats: false))

            _ = try worker.runAndWait(seconds: 0.05)
            _ = try worker.runAndWait(seconds: 0.05)

            let after = try #require(worker.observerSnapshots().first)
            #expect(after.id == observer.id)
            #expect(after.fired == 1)
            #expect(!after.valid)
            #expect(worker.activityNames == [.entry])
            #expect(runLoopError { _ = try worker.addObserver(ObserverSpec(activities: [])) }?.field == "activities")
        }
    }
}
