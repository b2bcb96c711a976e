import Primitives
import Testing

/// Debug builds catch the lock rule's two breaches in a test instead of a
/// hung server: a thread taking a `Locked` it already holds, and a call-out
/// point reached under a lock. Each breach stops its own child process (an
/// exit test), whose message must name the lock and the call sites.
@Suite("Lock checks (debug builds)")
struct LockCheckTests {
    #if DEBUG
        @Test("a deliberate double lock stops the process, naming the lock and both sites")
        func doubleLock() async throws {
            let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
                let lock = Locked(0)
                lock.withLock { _ in
                    lock.withLock { $0 += 1 }
                }
            }
            let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
            #expect(message.contains("lock re-entered"), "\(message)")
            #expect(message.contains("LockCheckTests.swift"), "\(message)")
        }

        @Test("a call-out point reached under a lock stops the process")
        func callOutUnderLock() async throws {
            let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
                let lock = Locked(0)
                lock.withLock { _ in LockCheck.assertNoneHeld("a close handler") }
            }
            let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
            #expect(message.contains("a close handler"), "\(message)")
            #expect(message.contains("holds 1 lock"), "\(message)")
        }
    #endif

    @Test("nested distinct locks and condition waits keep the count right")
    func counting() {
        let outer = Locked(0)
        let inner = Locked(0)
        #expect(LockCheck.heldCount == 0)
        outer.withLock { _ in
            inner.withLock { _ in
                #if DEBUG
                    #expect(LockCheck.heldCount == 2)
                #endif
            }
        }
        _ = outer.withLock(when: { _ in true }, timeout: 0.01) { _, ready in ready }
        #expect(LockCheck.heldCount == 0)
        LockCheck.assertNoneHeld("after the locks")
    }
}
