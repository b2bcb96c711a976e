import CoreFoundation
import Foundation
import Testing
import RunLoopTestSupport

@testable import RunLoopCore

/// Thread names and what workers leave behind.
@Suite struct ResourceTests {
    @Test func threadNameIsTruncatedToFifteenBytes() throws {
        let (registry, probe) = makeRegistry()
        defer { registry.endAll() }
        let tag = uniqueTag()
        let long = try registry.createWorker(options(.loop, name: "n\(tag)-a-long-worker-name"))
        // Multi-byte characters are never cut in half.
        let accented = try registry.createWorker(options(.loop, name: "\(tag.prefix(5))éééééééé"))
        #expect(probe.waitUntil { long.snapshot.state == .waiting && accented.snapshot.state == .waiting })

        #expect(long.threadName == "n\(tag)-a-lon")
        #expect(long.threadName.utf8.count == 15)
        #expect(long.snapshot.threadNameTruncated)
        #expect(accented.threadName == "\(tag.prefix(5))ééééé")
        #expect(accented.threadName.utf8.count == 15)
        let names = threadNames()
        #expect(names.contains(long.threadName))
        #expect(names.contains(accented.threadName))

        let short = try registry.createWorker(options(.manual, name: "short"))
        #expect(short.threadName == "short")
        #expect(!short.snapshot.threadNameTruncated)
    }

    @Test func twoHundredWorkersCreatedAndEndedLeaveNoThreadOrDescriptorBehind() throws {
        let tag = "z\(uniqueTag())"
        let descriptorsBefore = runLoopDescriptorCount()
        // The registry stays alive and remembers up to 64 exited workers: they
        // must not hold their run loops (an eventfd, an epoll set and a timerfd
        // per mode each).
        let registry = try runTwoHundredWorkers(tag: tag)
        defer { withExtendedLifetime(registry) {} }
        #expect(registry.allWorkers.count <= registry.limits.retainedExitedWorkers + 20)
        #expect(registry.allWorkers.allSatisfy { $0.hasExited && $0.runLoop == nil })

        // (Joined: each task leaves /proc a moment after its join returns.)
        #expect(
            waitUntil(timeout: 10) { !threadNames().contains { $0.hasPrefix(tag) } }, "every worker thread was joined")
        // 200 workers hold at least 800 eventfd / epoll / timerfd descriptors
        // while alive. Other suites run in parallel (HTTP servers have an epoll
        // set and an eventfd each), so allow a little noise and give the count
        // time to settle: a leak here would be hundreds.
        let settled = Probe().waitUntil(10) { runLoopDescriptorCount() <= descriptorsBefore + 24 }
        #expect(settled, "run-loop descriptors \(descriptorsBefore) → \(runLoopDescriptorCount())")
    }

    /// Creates 200 workers of every style and keep-alive, 20 alive at a time,
    /// gives each a timer, a port source and a perform, and ends them all.
    private func runTwoHundredWorkers(tag: String) throws -> WorkerRegistry {
        let (registry, _) = makeRegistry()
        let styles: [(RunStyle, KeepAlive)] = [
            (.loop, .port), (.loop, .timer), (.manual, .none), (.forever, .port), (.loop, .none),
        ]
        for batch in 0..<10 {
            var workers: [Worker] = []
            for index in 0..<20 {
                let (style, keepAlive) = styles[index % styles.count]
                let worker = try registry.createWorker(
                    options(style, keepAlive: keepAlive, seconds: 5, name: "\(tag)-\(batch)-\(index)"))
                _ = try worker.addTimer(TimerSpec(interval: 60))
                _ = try worker.addSource(SourceSpec(kind: .port))
                _ = try worker.performCall("count")
                workers.append(worker)
            }
            let finals = registry.endAll(timeout: 20)
            for worker in workers {
                let final = finals.first { $0.id == worker.id }?.snapshot
                #expect(final?.state == .exited, "worker \(worker.id) did not end")
            }
        }
        return registry
    }
}
