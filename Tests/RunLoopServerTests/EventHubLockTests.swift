import Dispatch
import Foundation
import Logging
import Primitives
import RunLoopStore
import RunLoopTestSupport
import Testing

@testable import MicroHTTP
@testable import RunLoopCore
@testable import RunLoopServer

/// The freeze of issue 22, replayed deterministically: a stream resumed with
/// `Last-Event-ID` holds live events while its replay is read; the hub once
/// closed an overflowing held stream, and flushed the held events, inside its
/// own lock, and the stream's close handler took that lock again (every thread
/// of the server then waited on it). Each step here runs on its own thread and
/// must finish before a deadline: on the old code it never does.
@Suite("EventHub: no call-out under its lock")
struct EventHubLockTests {
    /// A hub with a SQLite store in a fresh folder, and the recorder resumed streams replay from.
    private static func hub(maxHeld: Int) throws -> (EventHub, HistoryRecorder, String) {
        let folder = NSTemporaryDirectory() + "rl-hub-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let store = SQLiteStore(path: folder + "/history.sqlite")
        try store.open()
        let recorder = HistoryRecorder(
            store: store, options: StoreOptions(), sequence: EventSequence(),
            warnings: WarningTable(capacity: 16, emit: { _ in }), logger: Logger(label: "test"))
        let hub = EventHub(maxClients: 4, maxHeld: maxHeld)
        hub.history = recorder
        return (hub, recorder, folder)
    }

    /// A hub whose replay waits behind `gate` (so a resumed stream keeps
    /// holding live events until the test signals it), and a stream resumed on it.
    private static func holding(maxHeld: Int) throws -> (
        hub: EventHub, recorder: HistoryRecorder, stream: EventStream, gate: DispatchSemaphore, folder: String
    ) {
        let (hub, recorder, folder) = try Self.hub(maxHeld: maxHeld)
        let gate = DispatchSemaphore(value: 0)
        recorder.readers.async { gate.wait() }
        return (hub, recorder, try Self.resumed(hub), gate, folder)
    }

    /// Opens a stream that resumes after event 0 (what a reconnecting browser sends).
    private static func resumed(_ hub: EventHub) throws -> EventStream {
        var headers = HTTPHeaders()
        headers.append("Last-Event-ID", "0")
        let context = RouteContext(
            request: HTTPRequest(method: "GET", path: "/api/events", headers: headers), params: [:],
            respond: { _ in })
        guard case .response(let response) = try hub.open(context, threads: []), let stream = response.stream else {
            throw TestFailure("no stream")
        }
        return stream
    }

    /// Runs `work` on its own thread; false when it has not returned within `seconds` (a deadlock).
    private static func finishes(within seconds: Double, _ work: @escaping @Sendable () -> Void) -> Bool {
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            work()
            done.signal()
        }
        return done.wait(timeout: .now() + seconds) == .success
    }

    private static func event(_ n: Int, payload: Int = 0) -> RunLoopEvent {
        .task(
            thread: "t1", task: String(repeating: "x", count: payload) + "\(n)", change: .added, runs: n)
    }

    @Test("a resumed stream that overflows its held events is closed outside the hub's lock")
    func overflowWhileHeld() async throws {
        let (hub, _, stream, gate, folder) = try Self.holding(maxHeld: 5)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let published = await offThePool {
            Self.finishes(within: 10) {
                for n in 1...8 { hub.publish(Self.event(n), id: Int64(n)) }
            }
        }
        gate.signal()
        #expect(published, "publish deadlocked closing an overflowing resumed stream")
        guard published else { return }
        #expect(stream.closeReason == .closed)
        let counted = await offThePool { Self.finishes(within: 5) { _ = hub.clientCount } }
        #expect(counted)
        #expect(hub.clientCount == 0)
    }

    @Test("a slow reader that overflows during the held flush does not freeze the hub")
    func slowReaderDuringFlush() async throws {
        let (hub, recorder, stream, gate, folder) = try Self.holding(maxHeld: 10_000)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // Held while the replay waits: ~400 KiB, more than a stream buffers for a
        // client that reads nothing (256 KiB), so the flush overflows it.
        for n in 1...400 { hub.publish(Self.event(n, payload: 1000), id: Int64(n)) }
        gate.signal()
        // The flush runs on the reader queue; wait for it (and for the close) with a deadline.
        let flushed = await offThePool {
            Self.finishes(within: 10) { recorder.readers.sync {} }
        }
        #expect(flushed, "the held flush deadlocked when the slow client's stream closed")
        guard flushed else { return }
        #expect(stream.closeReason == .clientTooSlow)
        let live = await offThePool {
            Self.finishes(within: 5) { hub.publish(Self.event(401), id: 401) }
        }
        #expect(live, "publish blocked after the flush")
        #expect(hub.clientCount == 0)
        #expect(hub.droppedClients == 1)
    }

    @Test("events published during a replay reach the resumed stream in order, after `resumed`")
    func heldEventsKeepTheirOrder() async throws {
        let (hub, recorder, stream, gate, folder) = try Self.holding(maxHeld: 10_000)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        for n in 1...50 { hub.publish(Self.event(n), id: Int64(n)) }
        gate.signal()
        let flushed = await offThePool { Self.finishes(within: 10) { recorder.readers.sync {} } }
        #expect(flushed)
        for n in 51...60 { hub.publish(Self.event(n), id: Int64(n)) }
        let text = String(decoding: stream.bufferedText, as: UTF8.self)
        let ids = text.split(separator: "\n").compactMap { line in
            line.hasPrefix("id: ") ? Int(line.dropFirst(4)) : nil
        }
        #expect(ids == Array(1...60))
        let resumedAt = text.range(of: "event: resumed")
        let firstHeld = text.range(of: "id: 1\n")
        #expect(resumedAt != nil && firstHeld != nil && resumedAt!.lowerBound < firstHeld!.lowerBound)
    }
}

private struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
