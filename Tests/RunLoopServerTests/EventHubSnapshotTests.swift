import Dispatch
import Foundation
import Primitives
import RunLoopTestSupport
import Testing

@testable import MicroHTTP
@testable import RunLoopCore
@testable import RunLoopServer

/// The coalescing of `scope=summary` streams, in process: nothing is marked
/// or armed while no summary stream is open, and a thread the registry
/// forgets is listed as removed.
@Suite("EventHub: summary snapshots")
struct EventHubSnapshotTests {
    /// A hub fed by a registry of its own (ids from one counter), as the service wires them.
    private static func wired(_ limits: Limits = Limits(), snapshotMs: Int = 20) -> (EventHub, WorkerRegistry) {
        let hub = EventHub(maxClients: 4, snapshotMs: snapshotMs)
        let ids = Locked<Int64>(0)
        let registry = WorkerRegistry(limits: limits) { [weak hub] event in
            let id = ids.withLock { n -> Int64 in
                n += 1
                return n
            }
            hub?.publish(event, id: id)
        } listingChanged: { [weak hub] ids in
            hub?.listingChanged(ids)
        }
        hub.registry = registry
        return (hub, registry)
    }

    private static func open(_ hub: EventHub, _ query: [String: String]) throws -> EventStream {
        let context = RouteContext(
            request: HTTPRequest(method: "GET", path: "/api/events", query: query), params: [:], respond: { _ in })
        let scope = try StreamScope(query, limits: APILimits())
        guard case .response(let response) = try hub.open(context, scope: scope, threads: []),
            let stream = response.stream
        else { throw NoStream() }
        return stream
    }

    /// The `snapshot` events buffered on `stream` so far, parsed.
    private static func snapshots(_ stream: EventStream) -> [Value] {
        let text = String(decoding: stream.bufferedText, as: UTF8.self)
        return text.components(separatedBy: "\n\n").compactMap { block -> Value? in
            guard block.hasPrefix("event: snapshot\n"), let line = block.split(separator: "\n").last,
                line.hasPrefix("data: ")
            else { return nil }
            return try? JSON.parse(Array(line.dropFirst(6).utf8))
        }
    }

    @Test("without a summary stream nothing is marked and no snapshot is armed, whatever is published")
    func idleWithoutSummaryClients() async throws {
        let (hub, registry) = Self.wired()
        defer { registry.endAll() }
        let plain = try Self.open(hub, [:])
        let worker = try registry.createWorker(
            WorkerOptions(policy: RunPolicy(style: .loop, mode: .default, seconds: 30)))
        for n in 1...50 {
            hub.publish(.task(thread: worker.id, task: "x\(n)", change: .added, runs: n), id: 1000 + Int64(n))
        }
        let (armed, dirty, summaries) = hub.clients.withLock { ($0.flushArmed, $0.dirty.count, $0.summaryClients) }
        #expect(!armed)
        #expect(dirty == 0)
        #expect(summaries == 0)
        #expect(Self.snapshots(plain).isEmpty)
        // A summary stream arms one snapshot; once it has gone and the stream
        // closes, events mark nothing again.
        let summary = try Self.open(hub, ["scope": "summary"])
        #expect(waitUntil(timeout: 10) { !Self.snapshots(summary).isEmpty })
        summary.close()
        #expect(waitUntil(timeout: 10) { hub.clients.withLock { $0.summaryClients == 0 } })
        for n in 51...60 {
            hub.publish(.task(thread: worker.id, task: "x\(n)", change: .added, runs: n), id: 1000 + Int64(n))
        }
        #expect(hub.clients.withLock { $0.dirty.isEmpty })
    }

    @Test("a hello larger than the server's stream buffer (every thread, at scale) does not drop the client")
    func largeHello() throws {
        let hub = EventHub(maxClients: 2, sseBufferBytes: 64 * 1024)
        // 300 threads of 1 KB: a hello of about 300 KB, more than the 64 KiB buffer.
        let threads = (1...300).map { n -> Value in
            ["id": .string("t\(n)"), "padding": .string(String(repeating: "x", count: 1000))]
        }
        let context = RouteContext(
            request: HTTPRequest(method: "GET", path: "/api/events"), params: [:], respond: { _ in })
        guard case .response(let response) = try hub.open(context, threads: threads), let stream = response.stream
        else { throw NoStream() }
        #expect(stream.closeReason == nil)
        let text = String(decoding: stream.bufferedText, as: UTF8.self)
        #expect(text.hasPrefix("event: hello\ndata: {\"client\":1,"))
        #expect(text.count > 300_000)
        // Live events still fit behind it.
        hub.publish(.task(thread: "t1", task: "x", change: .added, runs: 1), id: 1)
        #expect(stream.closeReason == nil)
    }

    @Test("a thread the registry forgets is listed in the next snapshot's removed, and its row is gone")
    func forgottenThreadsAreRemoved() async throws {
        var limits = Limits()
        limits.retainedExitedWorkers = 1
        let (hub, registry) = Self.wired(limits)
        defer { registry.endAll() }
        let manual = WorkerOptions(policy: RunPolicy(style: .manual, mode: .default, seconds: 30))
        let first = try registry.createWorker(manual)
        let second = try registry.createWorker(manual)
        let stream = try Self.open(hub, ["scope": "summary"])
        #expect(waitUntil(timeout: 10) { Self.snapshots(stream).count == 1 })
        let all = try #require(Self.snapshots(stream).first)
        #expect(all["rows"].items.compactMap { $0["id"].string } == [first.id, second.id])
        // Both end; the next creation forgets the older exited one (one is retained).
        for worker in [first, second] {
            let ended = DispatchSemaphore(value: 0)
            worker.end { _ in ended.signal() }
            #expect(ended.wait(timeout: .now() + 10) == .success)
        }
        let third = try registry.createWorker(manual)
        #expect((try? registry.worker(first.id)) == nil)
        #expect(
            waitUntil(timeout: 10) {
                Self.snapshots(stream).contains { $0["removed"].items.contains(.string(first.id)) }
            })
        let removal = try #require(Self.snapshots(stream).first { $0["removed"].items.contains(.string(first.id)) })
        #expect(!removal["rows"].items.contains { $0["id"] == .string(first.id) })
        #expect(removal["summary", "threads"] == 2)
        #expect(
            waitUntil(timeout: 10) {
                Self.snapshots(stream).contains { $0["rows"].items.contains { $0["id"] == .string(third.id) } }
            })
    }
}

private struct NoStream: Error {}
