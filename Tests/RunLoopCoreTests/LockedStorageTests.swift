import Foundation
import Primitives
import Testing

/// `Locked`'s storage (issue 41): one object per lock, the value in its
/// header and the mutex and condition in its tail (`LockedBuffer`).
@Suite struct LockedStorageTests {
    /// A `Locked` is one reference: copies share the one object, its lock
    /// and its value.
    @Test func aLockIsOneReferenceAndCopiesShareIt() {
        #expect(MemoryLayout<Locked<[Int]>>.size == MemoryLayout<AnyObject>.size)
        let lock = Locked([1])
        let copy = lock
        copy.withLock { $0.append(2) }
        #expect(lock.withLock { $0 } == [1, 2])
    }

    /// Many locks made, taken, waited on and released (`LOCKED_COUNT`,
    /// default 1,000): a run under valgrind counts the allocations per lock
    /// (one: `LOCKED_COUNT=1000` against `11000`; it was two).
    @Test func manyLocksMadeTakenAndWaitedOn() {
        let count = ProcessInfo.processInfo.environment["LOCKED_COUNT"].flatMap(Int.init) ?? 1000
        var total = 0
        for index in 0..<count {
            let lock = Locked(index)
            lock.withLock { $0 += 1 }
            lock.notifyAll()
            total += lock.withLock(when: { $0 > index }, timeout: 1) { value, ready in ready ? value - index : 0 }
        }
        #expect(total == count)
    }

    /// A timed wait whose condition never holds ends at its deadline, told so.
    @Test func aTimedWaitEndsAtItsDeadline() {
        let lock = Locked(false)
        let ready = lock.withLock(when: { $0 }, timeout: 0.01) { _, ready in ready }
        #expect(!ready)
    }
}
