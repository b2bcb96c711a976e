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

    /// Played in a child process of its own (an exit test): the descriptors
    /// counted are the whole process's, and the suites running in parallel
    /// in the test process open and close their own meanwhile (seen: 458 →
    /// 664 under `make test`), so counted there it judged other tests.
    @Test func twoHundredWorkersCreatedAndEndedLeaveNoThreadOrDescriptorBehind() async throws {
        let result = await #expect(processExitsWith: .success, observing: [\.standardErrorContent]) {
            let problems = ResourceTests.leftBehind()
            if !problems.isEmpty {
                FileHandle.standardError.write(Data(problems.joined(separator: "\n").utf8))
                exit(1)
            }
        }
        let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
        #expect(!message.contains("did not end") && !message.contains("run-loop descriptors"), "\(message)")
    }

    /// What 200 workers left behind once ended: each problem found.
    static func leftBehind() -> [String] {
        var problems: [String] = []
        let tag = "z\(uniqueTag())"
        let descriptorsBefore = runLoopDescriptorCount()
        // The registry stays alive and remembers up to 64 exited workers: they
        // must not hold their run loops (an eventfd, an epoll set and a timerfd
        // per mode each).
        let registry: WorkerRegistry
        do {
            registry = try runTwoHundredWorkers(tag: tag, problems: &problems)
        } catch {
            return problems + ["workers could not be made: \(error)"]
        }
        defer { withExtendedLifetime(registry) {} }
        if registry.allWorkers.count > registry.limits.retainedExitedWorkers + 20 {
            problems.append("the registry keeps \(registry.allWorkers.count) workers")
        }
        if !registry.allWorkers.allSatisfy({ $0.hasExited && $0.runLoop == nil }) {
            problems.append("an exited worker holds its run loop")
        }
        // (Joined: each task leaves /proc a moment after its join returns.)
        if !waitUntil(timeout: 10, { !threadNames().contains { $0.hasPrefix(tag) } }) {
            problems.append("a worker thread was not joined")
        }
        // 200 workers hold at least 800 eventfd / epoll / timerfd descriptors
        // while alive; a leak would be hundreds. Alone in this process, the
        // count must come back to where it was (a few of libdispatch's own
        // may be made on the way).
        if !Probe().waitUntil(10, { runLoopDescriptorCount() <= descriptorsBefore + 8 }) {
            problems.append("run-loop descriptors \(descriptorsBefore) → \(runLoopDescriptorCount())")
        }
        return problems
    }

    /// Creates 200 workers of every style and keep-alive, 20 alive at a time,
    /// gives each a timer, a port source and a perform, and ends them all.
    private static func runTwoHundredWorkers(tag: String, problems: inout [String]) throws -> WorkerRegistry {
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
            for worker in workers where finals.first(where: { $0.id == worker.id })?.snapshot?.state != .exited {
                problems.append("worker \(worker.id) did not end")
            }
        }
        return registry
    }
}
