import Foundation
import Logging
import RunLoopStore
import RunLoopTestSupport
import Testing

@testable import RunLoopCore
@testable import RunLoopServer

/// The history bounded in bytes (issue 37 finding 5, issue 40 item 2): an
/// event's stored text is cut to its cap with a marker, never dropped; the
/// queue is bounded in bytes (the oldest go, counted); a size prune never
/// deletes the newest batch, so no limit empties the store.
@Suite("History budgets in bytes")
struct HistoryBudgetTests {
    static func parsed(_ text: String) throws -> [String: Any] {
        let object = try JSONSerialization.jsonObject(with: Data(text.utf8))
        return try #require(object as? [String: Any], "\(text.prefix(200))")
    }

    @Test("a 60 KB perform's row is cut to the cap: valid JSON, small members whole, the large one a marker")
    func performCut() throws {
        let blob = String(repeating: "é", count: 30_000)  // 60,000 bytes of UTF-8
        let result = PerformResult(
            performId: "p1", thread: "t1", selector: "echo", outcome: .success(["blob": .string(blob)]),
            queuedMs: 0.5, ranMs: 0.25)
        let row = HistoryRecorder.row(
            .event(.perform(thread: "t1", result: result)), seq: 1, at: 1_764_150_000, instance: "i1")
        #expect(row.data.utf8.count > 60_000)
        let cut = try #require(EventCut.cut(row.data, max: 8_192))
        #expect(cut.utf8.count <= 8_192)
        let object = try Self.parsed(cut)
        #expect(object["selector"] as? String == "echo")
        #expect(object["performId"] as? String == "p1")
        #expect(object["ok"] as? Bool == true)
        #expect(object["at"] as? String != nil)
        let marker = try #require(object["result"] as? [String: Any])
        #expect(marker["cut"] as? Int == #"{"blob":""#.utf8.count + 60_000 + #""}"#.utf8.count)
        #expect((marker["head"] as? String)?.hasPrefix(#"{"blob":"é"#) == true)
        let stamp = try #require(object["storedCut"] as? [String: Any])
        #expect(stamp["bytes"] as? Int == row.data.utf8.count)
        #expect(stamp["max"] as? Int == 8_192)
        // What fits is left alone.
        #expect(EventCut.cut(row.data, max: row.data.utf8.count) == nil)
    }

    @Test("a request's body and answer are cut, each a marker; text that is not an object keeps its head")
    func requestAndFallback() throws {
        let body =
            Array(#"{"selector":"echo","args":{"pad":""#.utf8) + Array(repeating: UInt8(ascii: "y"), count: 60_000)
            + Array(#""}}"#.utf8)
        let row = HistoryRecorder.row(
            .request(
                method: "POST", path: "/api/threads/t1/perform", status: 200, requestId: "r1", body: body,
                answer: body + [0x0A]), seq: 2, at: 1_764_150_000, instance: "i1")
        let cut = try #require(EventCut.cut(row.data, max: 2_048))
        #expect(cut.utf8.count <= 2_048)
        let object = try Self.parsed(cut)
        #expect(object["method"] as? String == "POST" && object["status"] as? Int == 200)
        #expect(object["requestId"] as? String == "r1" && object["thread"] as? String == "t1")
        #expect((object["body"] as? [String: Any])?["cut"] as? Int == body.count)
        #expect((object["answer"] as? [String: Any])?["cut"] != nil)
        // Many small members that cannot fit: the whole text becomes its head and the stamp.
        let many = "{" + (0..<2_000).map { #""k\#($0)":\#($0)"# }.joined(separator: ",") + "}"
        let whole = try Self.parsed(try #require(EventCut.cut(many, max: 1_024)))
        #expect((whole["head"] as? String)?.hasPrefix(#"{"k0":0"#) == true)
        #expect((whole["storedCut"] as? [String: Any])?["bytes"] as? Int == many.utf8.count)
        let array = "[" + String(repeating: "1,", count: 5_000) + "1]"
        #expect(try Self.parsed(try #require(EventCut.cut(array, max: 1_024)))["head"] as? String != nil)
    }

    @Test("random objects: every cut is valid JSON within the cap, its small members whole (seed printed)")
    func randomCuts() throws {
        let seed = SplitMix.seed("CUTS_SEED", test: "HistoryBudgetTests.randomCuts")
        var rng = SplitMix(seed)
        for round in 0..<300 {
            var object: [String: Value] = [:]
            for key in 0..<Int(rng.next() % 12) {
                let length = Int(rng.next() % 6) == 0 ? Int(rng.next() % 20_000) : Int(rng.next() % 40)
                let characters = ["a", "\"", "\\", "\n", "é", "😀", "\u{1}"]
                let text = (0..<length).map { _ in characters[Int(rng.next() % UInt64(characters.count))] }.joined()
                object["k\(key)"] = rng.next() % 3 == 0 ? .object(["inner": .string(text)]) : .string(text)
            }
            let text = JSON.string(.object(object))
            let cap = 1_024 + Int(rng.next() % 8_000)
            guard let cut = EventCut.cut(text, max: cap) else {
                #expect(text.utf8.count <= cap, "round \(round), seed \(seed)")
                continue
            }
            #expect(cut.utf8.count <= cap, "round \(round), seed \(seed)")
            let parsed = try Self.parsed(cut)
            #expect(parsed["storedCut"] != nil, "round \(round), seed \(seed)")
            if parsed["head"] == nil {
                for (key, value) in object where JSON.string(value).utf8.count <= 64 {
                    #expect(parsed[key] != nil, "round \(round), seed \(seed): \(key) kept")
                }
            }
        }
    }

    @Test("the queue is bounded in bytes: past it the oldest go (counted), the newest stay, cut events counted")
    func queueBoundedInBytes() throws {
        let folder = NSTemporaryDirectory() + "rl-budget-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var options = StoreOptions()
        options.queueBytes = 50_000
        options.eventBytes = 4_096
        // Never started: nothing drains the queue.
        let recorder = HistoryRecorder(
            store: SQLiteStore(path: folder + "/history.sqlite"), options: options, sequence: EventSequence(),
            warnings: WarningTable(capacity: 16, emit: { _ in }), logger: Logger(label: "test"))
        let pad = [UInt8](repeating: UInt8(ascii: "z"), count: 50_000)
        for seq in 1...200 {
            recorder.record(
                .request(
                    method: "POST", path: "/api/threads/t1/perform", status: 200, requestId: "r\(seq)",
                    body: Array(#"{"p":""#.utf8) + pad + Array(#""}"#.utf8), answer: Array("{}\n".utf8)),
                seq: Int64(seq))
        }
        let status = recorder.status
        #expect(status.queuedBytes <= 50_000)
        #expect(status.cut == 200)
        #expect(status.dropped + status.queued == 200)
        #expect(status.dropped > 50)
        let pending = recorder.pending(after: 0)
        #expect(pending.last?.seq == 200)
        #expect(pending.map(\.seq) == Array((201 - Int64(pending.count))...200))
        #expect(pending.allSatisfy { $0.data.utf8.count <= 4_096 })
    }
}

extension HistoryBudgetTests {
    @Test("SQLite: a size prune never empties the store: the newest batch stays at any limit, even 1 byte")
    func sqliteNeverEmpty() throws { try neverEmpty(kind: "sqlite") }

    @Test("PostgreSQL: a size prune never empties the store: the newest rows stay at any limit", .needsPostgres)
    func postgresNeverEmpty() throws { try neverEmpty(kind: "postgres") }

    func neverEmpty(kind: String) throws {
        try HistoryStoreTests.withOpenStore(kind) { store in
            _ = try store.register(HistoryStoreTests.instance("i1"))
            let payload = #"{"pad":""# + String(repeating: "x", count: 2_000) + #""}"#
            for start in stride(from: 1, through: 1_000, by: 100) {
                try store.write(
                    StoreBatch(
                        events: (start..<(start + 100)).map {
                            HistoryStoreTests.event(Int64($0), at: Double($0), data: payload)
                        }))
            }
            for limit in [Int64(300_000), 1] {
                _ = try store.prune(Retention(maxAge: nil, maxBytes: limit), now: 1_000)
                let left = try store.events(HistoryQuery(limit: 1_000, ascending: true))
                #expect(!left.isEmpty, "limit \(limit)")
                #expect(left.last?.seq == 1_000)
                #expect(left.map(\.seq) == Array((left.first?.seq ?? 0)...1_000))
                if kind == "sqlite" {
                    // The newest batch, whole.
                    #expect(left.count >= 100, "limit \(limit): \(left.count)")
                }
            }
        }
    }
}
