import CoreFoundation
import Foundation
import RunLoopTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// A fresh thread with its own run loop, for the raw plain-CF cases
/// (ClaimOracleRawCases.swift): what runs there, and what another thread
/// does to it once it sleeps.
enum RawLoop {
    /// What C callbacks record (they reach it through their info pointer).
    final class Calls: Sendable {
        private let items = Monitor<[String]>([])
        let fd: Int32
        let loopThread: pthread_t

        init(fd: Int32 = -1, loopThread: pthread_t = pthread_self()) {
            self.fd = fd
            self.loopThread = loopThread
        }

        func add(_ item: String) { items.update { $0.append(item) } }
        var list: [String] { items.value }

        static func from(_ info: UnsafeRawPointer?) -> Calls {
            guard let info else { preconditionFailure("a callback without its info") }
            return Unmanaged<Calls>.fromOpaque(info).takeUnretainedValue()
        }
    }

    /// Carries what is not `Sendable` to the thread that uses it alone.
    final class Box<T>: @unchecked Sendable {
        var value: T
        init(_ value: T) { self.value = value }
    }

    static let beforeWaiting: CFOptionFlags = 1 << 5
    static let entry: CFOptionFlags = 1 << 0

    /// Runs `body` on a fresh thread with its run loop; its problems, or
    /// that it did not end within 30 s.
    static func loop(_ body: @escaping (CFRunLoop, _ asleep: (@escaping @Sendable () -> Void) -> Void) -> [String])
        -> [String]
    {
        let result = Monitor<[String]?>(nil)
        let work = Box(body)
        Thread {
            let loop = CFRunLoopGetCurrent()!
            // `asleep(action)`: `action` runs on another thread the first
            // time the loop is about to sleep (its beforeWaiting).
            let asleep = { (action: @escaping @Sendable () -> Void) in
                let sleeping = Monitor(false)
                let observer = CFRunLoopObserverCreateWithHandler(nil, beforeWaiting, false, 0) { _, _ in
                    sleeping.update { $0 = true }
                }
                CFRunLoopAddObserver(loop, observer, kCFRunLoopDefaultMode)
                Thread {
                    if sleeping.wait(timeout: 20, until: { $0 }) { action() }
                }.start()
            }
            let problems = work.value(loop, asleep)
            result.update { $0 = problems }
        }.start()
        guard result.wait(timeout: 30, until: { $0 != nil }) else {
            return ["the loop's thread did not end within 30 s"]
        }
        return result.value ?? []
    }

    /// `loop` with `asleep` only.
    static func asleep(_ body: @escaping (CFRunLoop, _ asleep: (@escaping @Sendable () -> Void) -> Void) -> [String])
        -> [String]
    {
        loop(body)
    }

    /// A loop kept alive by a timer far ahead, stopped (CFRunLoopStop from
    /// another thread) the first time it sleeps; with `thenEmpty`, the
    /// second time it sleeps its timer is invalidated and it is woken (its
    /// mode is empty). `body` gets the count of run entries so far.
    static func stoppedOnce(thenEmpty: Bool = false, _ body: @escaping (_ entries: () -> Int) -> [String]) -> [String] {
        loop { loop, _ in
            let timer = Box(farTimer(loop))
            let entries = Calls()
            let sleeps = Monitor(0)
            let entered = CFRunLoopObserverCreateWithHandler(nil, entry, true, 0) { _, _ in entries.add("entry") }
            let sleeping = CFRunLoopObserverCreateWithHandler(nil, beforeWaiting, true, 0) { _, _ in
                sleeps.update { $0 += 1 }
            }
            CFRunLoopAddObserver(loop, entered, kCFRunLoopDefaultMode)
            CFRunLoopAddObserver(loop, sleeping, kCFRunLoopDefaultMode)
            let target = Box(loop)
            Thread {
                guard sleeps.wait(timeout: 20, until: { $0 >= 1 }) else { return }
                CFRunLoopStop(target.value)
                guard thenEmpty, sleeps.wait(timeout: 20, until: { $0 >= 2 }) else { return }
                CFRunLoopTimerInvalidate(timer.value)
                CFRunLoopWakeUp(target.value)
            }.start()
            let problems = body { entries.list.count }
            CFRunLoopObserverInvalidate(entered)
            CFRunLoopObserverInvalidate(sleeping)
            CFRunLoopTimerInvalidate(timer.value)
            return problems
        }
    }

    /// A timer a day ahead in the default mode: it keeps the mode alive.
    static func farTimer(_ loop: CFRunLoop) -> CFRunLoopTimer {
        let timer = CFRunLoopTimerCreateWithHandler(nil, CFAbsoluteTimeGetCurrent() + 86_400, 0, 0, 0) { _ in }!
        CFRunLoopAddTimer(loop, timer, kCFRunLoopDefaultMode)
        return timer
    }

    static func name(_ mode: CFRunLoopMode?) -> String {
        guard let mode else { return "-" }
        var buffer = [CChar](repeating: 0, count: 256)
        guard CFStringGetCString(mode, &buffer, buffer.count, CFStringBuiltInEncodings.UTF8.rawValue) else {
            return "?"
        }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
