import Foundation
import Primitives
import Synchronization
import Testing

/// `Memo`: made at most once as seen by every caller, lock-free (issue 41: no
/// lock per perform result), and its value freed with it.
@Suite struct MemoTests {
    /// A value that counts how many of its kind are alive.
    final class Counted: Sendable {
        static let alive = Atomic<Int>(0)
        let tag: Int
        init(_ tag: Int) {
            self.tag = tag
            Self.alive.add(1, ordering: .relaxed)
        }
        deinit { Self.alive.subtract(1, ordering: .relaxed) }
    }

    @Test func aValueIsMadeOnceForOneCaller() {
        let memo = Memo<[UInt8]>()
        var made = 0
        let first = memo.value {
            made += 1
            return [1, 2]
        }
        let second = memo.value {
            made += 1
            return [3]
        }
        #expect(first == [1, 2] && second == [1, 2] && made == 1)
    }

    /// Eight threads ask each of 2,000 memos at once: every caller of one
    /// memo gets the same object, the first one stored, and the objects
    /// made by the callers that lost are freed, as is every memo's value
    /// once the memo goes.
    @Test func racingCallersAllGetTheFirstStoredValue() {
        let before = Counted.alive.load(ordering: .relaxed)
        do {
            let memos = (0..<2000).map { _ in Memo<Counted>() }
            // `Locked`, not `Mutex`: ThreadSanitizer does not model Mutex's futex word.
            let seen = Locked([[Int]](repeating: [], count: memos.count))
            DispatchQueue.concurrentPerform(iterations: 8) { caller in
                var mine = [Int](repeating: -1, count: memos.count)
                for (index, memo) in memos.enumerated() {
                    mine[index] = memo.value { Counted(caller) }.tag
                }
                seen.withLock { all in
                    for index in mine.indices { all[index].append(mine[index]) }
                }
            }
            let all = seen.withLock { $0 }
            #expect(all.allSatisfy { $0.count == 8 && Set($0).count == 1 })
            // Only the stored values are alive now.
            #expect(Counted.alive.load(ordering: .relaxed) - before == memos.count)
        }
        #expect(Counted.alive.load(ordering: .relaxed) == before)
    }
}
