import Foundation
import RunLoopStore
import RunLoopTestSupport
import Testing

@testable import RunLoopCore
@testable import RunLoopServer

/// The history rows the recording threads make (issue 26): a perform's text
/// is written directly, not through `Value`; it must be byte for byte what
/// describing the event and serializing it (with `at` in front) gives, for
/// every outcome and for strings that need escapes.
@Suite("History rows")
struct HistoryRowTests {
    /// The text through the general path: `EventHub.describe`, `at` added, `JSON.serialize`.
    static func described(_ event: RunLoopEvent, at: Double) -> String {
        let (_, _, data) = EventHub.describe(event)
        var object = data.object ?? [:]
        object["at"] = Timestamp.value(Date(timeIntervalSince1970: at))
        return JSON.string(.object(object))
    }

    static let results: [PerformResult] = [
        PerformResult(
            performId: "p1", thread: "t1", selector: "echo", outcome: .success(["n": 1, "s": "a\"b\\c\n\u{1}é"]),
            queuedMs: 0.0894, ranMs: 0),
        PerformResult(
            performId: "p2", thread: "t12", selector: "sleep", outcome: .success(.null), queuedMs: 12.3456,
            ranMs: 1500.25),
        PerformResult(
            performId: "p\"3", thread: "t1", selector: "fail\t",
            outcome: .failure(RunLoopError(kind: .failed, code: .selectorFailed, message: "it \"broke\"", field: "x")),
            queuedMs: 1e-9, ranMs: 3),
        PerformResult(
            performId: "p4", thread: "t2", selector: "echo", outcome: .success([1, "two", [true, false]]),
            queuedMs: 1e20, ranMs: -0.5),
    ]

    @Test("a perform's row is the described event's JSON, with `at`, byte for byte")
    func performRowMatchesDescribed() throws {
        for (index, result) in Self.results.enumerated() {
            let at = 1_764_150_000.123 + Double(index)
            let row = HistoryRecorder.row(
                .event(.perform(thread: result.thread, result: result)), seq: 7, at: at, instance: "i1")
            #expect(row.data == Self.described(.perform(thread: result.thread, result: result), at: at))
            #expect(row.type == "perform")
            #expect(row.thread == result.thread)
            #expect(row.seq == 7 && row.at == at && row.threadRow == nil)
            // And it is JSON whose members are the event's.
            let parsed = try JSONSerialization.jsonObject(with: Data(row.data.utf8)) as? [String: Any]
            #expect(parsed?["performId"] as? String == result.performId)
        }
    }

    @Test("a perform's answer is Rep.performResult's JSON, byte for byte, and made once for the answer and the row")
    func performAnswer() {
        for (index, result) in Self.results.enumerated() {
            let copy = result
            let row = PerformJSON.row(result, at: 1_764_150_000.5)
            // The row made the text; a copy of the result answers with the same bytes.
            var expected = JSON.serialize(Rep.performResult(result))
            expected.append(0x0A)
            #expect(copy.text.value { [] } == expected, "\(index)")
            #expect(PerformJSON.answer(copy) == expected)
            #expect(
                row == #"{"at":"2025-11-26T09:40:00.500Z","#
                    + String(decoding: expected.dropFirst().dropLast(), as: UTF8.self))
        }
    }

    @Test("a request's row: `at`, the request's fields, its body and its answer as sent")
    func requestRow() throws {
        let row = HistoryRecorder.row(
            .request(
                method: "POST", path: "/api/threads/t3/perform", status: 200, requestId: "r\"1",
                body: Array(#"{"selector":"echo"}"#.utf8), answer: Array(#"{"ok":true}"#.utf8)),
            seq: 9, at: 1_764_150_000.5, instance: "i1")
        #expect(row.type == "request" && row.thread == "t3")
        #expect(
            row.data
                == #"{"at":"2025-11-26T09:40:00.500Z","method":"POST","path":"/api/threads/t3/perform","status":200,"requestId":"r\"1","thread":"t3","body":{"selector":"echo"},"answer":{"ok":true}}"#
        )
        let refused = HistoryRecorder.row(
            .request(
                method: "POST", path: "/api/threads", status: 400, requestId: "r2", body: Array("not json".utf8),
                answer: Array("plain".utf8)),
            seq: 10, at: 1_764_150_000.5, instance: "i1")
        #expect(refused.thread == nil)
        let parsed = try JSONSerialization.jsonObject(with: Data(refused.data.utf8)) as? [String: Any]
        #expect(parsed?["body"] as? String == "not json")
        #expect(parsed?["answer"] as? String == "plain")
    }

    @Test("a perform keeps in its row only the request that answered it: next id, same thread, within 0.1 s")
    func foldRules() {
        func event(_ seq: Int64, _ type: String, thread: String? = "t1", at: Double = 10) -> HistoryRecorder.Queued {
            HistoryRecorder.Queued(seq: seq, at: at, type: type, thread: thread, data: "{}", threadRow: nil)
        }
        let perform = event(7, "perform")
        #expect(HistoryRecorder.folds(perform, event(8, "request", at: 10.00003)))
        #expect(!HistoryRecorder.folds(perform, event(9, "request")))  // another event came between
        #expect(!HistoryRecorder.folds(perform, event(8, "request", thread: "t2")))
        #expect(!HistoryRecorder.folds(perform, event(8, "request", thread: nil)))
        #expect(!HistoryRecorder.folds(perform, event(8, "request", at: 10.2)))
        #expect(!HistoryRecorder.folds(perform, event(8, "request", at: 9.9)))
        #expect(!HistoryRecorder.folds(perform, event(8, "perform")))
        #expect(!HistoryRecorder.folds(event(7, "run-exit"), event(8, "request")))
        #expect(!HistoryRecorder.folds(event(8, "request"), event(7, "perform")))
    }

    @Test("a kept request leaves out the answer its perform's payload repeats, and reads back byte for byte")
    func compactedRequest() throws {
        for (index, result) in Self.results.enumerated() {
            let at = 1_764_150_000.123 + Double(index)
            let perform = HistoryRecorder.row(
                .event(.perform(thread: result.thread, result: result)), seq: 7, at: at, instance: "i1"
            ).data
            // The answer as the route sends it: the payload without `at`, and a newline.
            var payload = try #require(try JSONReader.parse(Array(perform.utf8)).object)
            payload["at"] = nil
            let answer = Array((JSON.string(.object(payload)) + "\n").utf8)
            let request = HistoryRecorder.row(
                .request(
                    method: "POST", path: "/api/threads/\(result.thread)/perform", status: 200, requestId: "r1",
                    body: Array(#"{"selector":"echo"}"#.utf8), answer: answer),
                seq: 8, at: at + 0.001, instance: "i1"
            ).data
            let kept = try #require(StoredEvent.compacted(request: request, perform: perform), "\(index)")
            #expect(kept.hasSuffix(#""answer":"#) && kept.utf8.count == request.utf8.count - answer.count - 1)
            #expect(StoredEvent.expanded(request: kept, perform: perform) == request)
            var row = StoredEvent(
                instance: "i1", boot: 1, seq: 7, at: at, type: "perform", thread: result.thread, data: perform,
                request: kept, requestAt: at + 0.001)
            #expect(row.unfolded.map(\.data) == [perform, request])
            // Any other answer is kept whole.
            row.data = perform.replacingOccurrences(of: #""selector":"#, with: #""selectoR":"#)
            #expect(StoredEvent.compacted(request: request, perform: row.data) == nil)
            #expect(StoredEvent.compacted(request: request + " ", perform: perform) == nil)
            #expect(StoredEvent.compacted(request: request, perform: "{}") == nil)
        }
        // A whole text is never taken for a kept one.
        #expect(StoredEvent.expanded(request: #"{"ok":true}"#, perform: #"{"at":"x","ok":1}"#) == #"{"ok":true}"#)
    }

    @Test("a history page holds whole rows: a perform and its request are never split by `next`")
    func pagesKeepPairsWhole() {
        func events(_ ids: [Int64]) -> [StoredEvent] {
            ids.enumerated().map { index, id in
                StoredEvent(
                    id: id, instance: "i1", boot: 1, seq: Int64(index), at: 0, type: "perform", thread: nil,
                    data: "{}")
            }
        }
        let read = events([9, 9, 8, 7, 7])  // rows 9 (a pair), 8, 7 (a pair)
        func page(_ limit: Int) -> ([Int64], Bool) {
            let (kept, more) = API.page(read, limit: limit)
            return (kept.map(\.id), more)
        }
        // `limit` events, or one more when the last is a pair (issue 40: limit=5 answered 4).
        #expect(page(1) == ([9, 9], true))
        #expect(page(2) == ([9, 9], true))
        #expect(page(3) == ([9, 9, 8], true))
        #expect(page(4) == ([9, 9, 8, 7, 7], false))
        #expect(page(5) == ([9, 9, 8, 7, 7], false))
        #expect(API.page([], limit: 3).1 == false)
        #expect(API.page(events([4, 3]), limit: 1).0.map(\.id) == [4])
    }

    @Test("a row's numbers are JSON's, byte for byte (random sweep; seed printed)")
    func numbers() {
        // Seeds that ever failed are kept (6950224024690379890, found when the
        // rows had their own timestamp writer), then a fresh one.
        for seed in [6_950_224_024_690_379_890, UInt64.random(in: 1...UInt64.max)] {
            print("HistoryRowTests.numbers seed \(seed)")
            Self.numbers(seed: seed)
        }
    }

    static func numbers(seed: UInt64) {
        var generator = SplitMix(seed)
        var numbers: [Double] = [
            0, -0.0, 1, -1, 0.089, 1e15, 1e15 - 1, -1e15 + 1, 1e20, 1e-9, 12.3456, .infinity, .nan,
        ]
        for _ in 0..<2_000 {
            numbers.append((Double.random(in: -1e6...1e6, using: &generator) * 1000).rounded() / 1000)
            numbers.append(Double(Int.random(in: -1_000_000...1_000_000, using: &generator)))
        }
        for number in numbers {
            var mine: [UInt8] = []
            JSON.writeNumber(number, into: &mine)
            #expect(String(decoding: mine, as: UTF8.self) == JSON.format(number), "\(number) (seed \(seed))")
        }
    }
}
