import CoreFoundation
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The plain-CF oracle of the predict differential: it builds a setup with
/// raw CoreFoundation calls on a fresh thread (`CFRunLoopTimerCreateWithHandler`,
/// `CFRunLoopSourceCreate` version 0 and version 1 on an eventfd,
/// `CFRunLoopSourceSignal`, `CFRunLoopWakeUp`, `CFRunLoopObserverCreateWithHandler`,
/// `CFRunLoopStop`, `CFRunLoopRunInMode`), makes the setup's stimuli from the
/// calling thread at their slots, and reports what CF did: each run's exit
/// reason, who stopped it, the sources handled in its last pass, and the
/// callouts of every turn. None of runloopd's code is in it: where runloopd
/// and this disagree, CF is right.
///
/// A perform is played as runloopd documents `performSelector:onThread:`:
/// one version-0 source of order 0 per mode name (`common` included), in
/// the mode only while a perform waits for it, signalled and the loop woken
/// when one is queued; its routine runs, in queue order, the performs for
/// its mode queued before it began. A delayed perform is a one-shot timer.
/// A block perform is `CFRunLoopPerformBlock` and `CFRunLoopWakeUp`.
public enum CFOracle {
    /// Plays the JSON of an `OracleSetup`; returns the JSON of its `OracleResult`.
    public static func play(json: Data) throws -> Data {
        let setup = try JSONDecoder().decode(OracleSetup.self, from: json)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return try encoder.encode(play(setup))
    }

    /// Plays one setup (the calling thread makes the stimuli; blocks until
    /// the run returned).
    public static func play(_ setup: OracleSetup) -> OracleResult {
        Player(setup).play()
    }

    /// Test hook: `beforeStimuli` runs on the calling thread once the loop
    /// is built, before the first stimulus, and gets a call that waits for
    /// the run to return (a stand-in for that thread taken off the CPU).
    public static func play(
        _ setup: OracleSetup, beforeStimuli: @escaping (_ waitForRunEnd: () -> Void) -> Void
    ) -> OracleResult {
        let player = Player(setup)
        player.beforeStimuli = beforeStimuli
        return player.play()
    }
}

/// `eventfd(2)`, reached through the C library (Glibc's module does not import it).
let eventfdCall: (@convention(c) (UInt32, Int32) -> Int32)? = {
    guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "eventfd") else { return nil }
    return unsafeBitCast(symbol, to: (@convention(c) (UInt32, Int32) -> Int32).self)
}()

func cfMode(_ name: String) -> CFRunLoopMode {
    switch name {
    case "default": return kCFRunLoopDefaultMode
    case "common": return kCFRunLoopCommonModes
    default:
        var bytes = Array(name.utf8)
        return CFStringCreateWithBytes(nil, &bytes, bytes.count, CFStringBuiltInEncodings.UTF8.rawValue, false)
    }
}

let activityBits: [String: CFOptionFlags] = [
    "entry": 1 << 0, "beforeTimers": 1 << 1, "beforeSources": 1 << 2, "beforeWaiting": 1 << 5,
    "afterWaiting": 1 << 6, "exit": 1 << 7,
]

/// The info a version-0 or version-1 source's C callbacks reach; its source
/// owns it (the context's retain and release). A user observer's C callout
/// reaches one too, owned by the player's `keep` instead.
final class SourceInfo {
    let perform: () -> Void
    let port: Int32
    init(port: Int32 = -1, perform: @escaping () -> Void) {
        self.port = port
        self.perform = perform
    }
    static func from(_ info: UnsafeRawPointer?) -> SourceInfo? {
        info.map { Unmanaged<SourceInfo>.fromOpaque($0).takeUnretainedValue() }
    }
    static let retain: @convention(c) (UnsafeRawPointer?) -> UnsafeRawPointer? = { info in
        if let info { _ = Unmanaged<SourceInfo>.fromOpaque(info).retain() }
        return info
    }
    static let release: @convention(c) (UnsafeRawPointer?) -> Void = { info in
        if let info { Unmanaged<SourceInfo>.fromOpaque(info).release() }
    }
}

// Split by concern: the calling thread here, the loop's thread in
// CFOracle+Loop.swift, the setup's CF objects in CFOracle+Build.swift, the
// performs in CFOracle+Performs.swift.
// @unchecked: `state` is guarded by `lock`; the CF objects are set up on the
// loop thread before any other thread reads them (the `built` handshake) and
// CF's calls are thread-safe.
final class Player: @unchecked Sendable {
    struct OpenTurn {
        var afterWake: Bool
        var wokeBy: String?
        var callouts: [String] = []
    }
    struct RunRecord {
        var depth: Int
        var subject: Bool
        var turns: [OracleResult.Turn] = []
        var open: OpenTurn? = OpenTurn(afterWake: false, wokeBy: "none")
        var handled: [String] = []
        var stopBy: String?
        var outside = false
        var exiting = false
        var start: Double
        /// When CF's timeout is due (nil: a run of 0 seconds).
        var deadline: Double?
    }
    struct Pending {
        var seq: Int
        var label: String
        var keys: [String]
        var action: OracleSetup.Action?
    }
    struct Carrier {
        var source: CFRunLoopSource
        var inLoop = false
        var signalled = false
    }
    struct State {
        var runs: [RunRecord] = []
        var done: [(record: RunRecord, reason: String, end: Double)] = []
        var pending: [Pending] = []
        var lastSeq = 0
        var carriers: [String: Carrier] = [:]
        var timerFires: [Int: Int] = [:]
        var lateMs = 0.0
        /// Between beforeWaiting and afterWaiting: the loop sleeps.
        var asleep = false
        /// When a stop or wake-up was made while the loop slept, until it wakes.
        var wakeAskedAt: Double?
        var built = false
        var ended = false
        var stimulusPerforms = 0
    }

    let setup: OracleSetup
    let q: Double
    let lock = NSCondition()
    var state = State()
    var anchor = 0.0
    var loop: CFRunLoop?
    var timers: [CFRunLoopTimer] = []
    var sources: [CFRunLoopSource] = []
    var fds: [Int32] = []
    var delayed: [CFRunLoopTimer?] = []
    var observers: [CFRunLoopObserver] = []
    var beforeStimuli: ((_ waitForRunEnd: () -> Void) -> Void)?
    var keep: [AnyObject] = []
    /// How late past its slot anything may be before the play is not as planned.
    static let lateMs = 8.0

    init(_ setup: OracleSetup) {
        self.setup = setup
        q = setup.quantum
    }

    func locked<T>(_ body: (inout State) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body(&state)
    }

    func late(_ ms: Double) { locked { $0.lateMs = max($0.lateMs, ms) } }

    /// Notes a stop or wake-up about to be made while the loop sleeps: the
    /// loop must wake within `lateMs` of it. Woken later, its thread was off
    /// the CPU, and a wake that lands on the next slot of the grid (the
    /// deadline's) looks planned: the deadline's timeout then wins the wake
    /// and the run times out where the plan stops it (plain CF once said
    /// timedOut, the stop at slot 1 of 2 on time, the wake at slot 2).
    func wakeAsked() {
        let now = CFAbsoluteTimeGetCurrent()
        locked { s in
            if s.asleep && s.wakeAskedAt == nil { s.wakeAskedAt = now }
        }
    }

    // MARK: - The calling thread

    func play() -> OracleResult {
        anchor = CFAbsoluteTimeGetCurrent()
        guard let thread = startLoopThread() else {
            return OracleResult(
                run: OracleResult.Run(exitReason: "none", handled: [], turns: [], ms: 0), nested: [], lateMs: 1000)
        }
        defer {
            // The loop thread's run loop is torn down when the thread exits
            // (CF's thread-specific data), reaching its sources' infos: only
            // once it is gone do the tables go, and with them the closures
            // that hold this player (the cycle is broken, nothing leaks).
            pthread_join(thread, nil)
            breakCycles()
        }
        lock.lock()
        while !state.built { lock.wait() }
        lock.unlock()
        // Messages written before the run, at their slots.
        var before: [(slot: Int, fd: Int32)] = []
        for (index, plan) in setup.sources.enumerated() where plan.port {
            before += plan.messageSlots.map { ($0, fds[index]) }
        }
        for (slot, fd) in before.sorted(by: { $0.slot < $1.slot }) {
            waitUntil(anchor + Double(slot) * q)
            var one: UInt64 = 1
            _ = write(fd, &one, 8)
            late((CFAbsoluteTimeGetCurrent() - anchor - Double(slot) * q) * 1000)
        }
        beforeStimuli?(waitForRunEnd)
        for stimulus in setup.stimuli.sorted(by: { $0.slot < $1.slot }) {
            let due = anchor + Double(stimulus.slot) * q
            let ended = waitUntil(due)
            // The run it aimed at already over, though it ended after the
            // stimulus's slot: this thread came late (off the CPU) and the
            // run went on without it (a stop never made lets it reach its
            // deadline). Not played as planned. A run that ended before the
            // slot is the plan: later stimuli are not made.
            if let end = subjectEnd() {
                if end > due { late((CFAbsoluteTimeGetCurrent() - due) * 1000) }
                break
            }
            if ended { break }
            apply(stimulus)
            late((CFAbsoluteTimeGetCurrent() - due) * 1000)
        }
        lock.lock()
        while !state.ended { lock.wait() }
        let done = state.done
        let lateMs = state.lateMs
        lock.unlock()
        for fd in fds where fd >= 0 { close(fd) }
        func run(_ entry: (record: RunRecord, reason: String, end: Double)) -> OracleResult.Run {
            OracleResult.Run(
                exitReason: entry.reason,
                stopper: entry.reason == "stopped" ? (entry.record.outside ? "outside" : entry.record.stopBy) : nil,
                handled: entry.record.handled, turns: entry.record.turns,
                ms: ((entry.end - entry.record.start) * 1_000_000).rounded() / 1000)
        }
        let subject = done.first { $0.record.subject }
        let depth = subject?.record.depth ?? 0
        return OracleResult(
            run: subject.map(run) ?? OracleResult.Run(exitReason: "none", handled: [], turns: [], ms: 0),
            nested: done.filter { $0.record.depth > depth }.map(run), lateMs: lateMs)
    }

    /// The loop's thread: joinable (a Foundation `Thread` is not), 4 MiB of
    /// stack for the nested runs.
    func startLoopThread() -> pthread_t? {
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        defer { pthread_attr_destroy(&attributes) }
        pthread_attr_setstacksize(&attributes, 4 << 20)
        var thread = pthread_t()
        let me = Unmanaged.passRetained(self).toOpaque()
        let made = pthread_create(
            &thread, &attributes,
            { raw in
                Unmanaged<Player>.fromOpaque(raw!).takeRetainedValue().loopThread()
                return nil
            }, me)
        guard made == 0 else {
            Unmanaged<Player>.fromOpaque(me).release()
            return nil
        }
        return thread
    }

    /// Drops every CF object and info this player holds (their handlers and
    /// infos hold the player), after the loop thread has exited.
    func breakCycles() {
        timers.removeAll()
        sources.removeAll()
        observers.removeAll()
        delayed.removeAll()
        keep.removeAll()
        locked { $0.carriers.removeAll() }
        loop = nil
    }

    /// When the run asked for returned (nil: it has not).
    func subjectEnd() -> Double? {
        locked { s in s.done.first { $0.record.subject }?.end }
    }

    /// Waits until the run asked for has returned (the test hook's wait).
    func waitForRunEnd() {
        lock.lock()
        defer { lock.unlock() }
        while !state.ended && !state.done.contains(where: { $0.record.subject }) { lock.wait() }
    }

    /// Waits until `date` unless the loop thread ends first; returns whether it ended.
    @discardableResult
    func waitUntil(_ date: Double) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        while !state.ended {
            let left = date - CFAbsoluteTimeGetCurrent()
            if left <= 0 { return false }
            _ = lock.wait(until: Date(timeIntervalSinceNow: left))
        }
        return true
    }

    /// A stimulus's wake-up, noted first (`wakeAsked`).
    func wakeUp(_ loop: CFRunLoop) {
        wakeAsked()
        CFRunLoopWakeUp(loop)
    }

    func apply(_ stimulus: OracleSetup.Stimulus) {
        guard let loop else { return }
        let index = stimulus.index ?? 0
        let wake = stimulus.wakeUp ?? false
        switch stimulus.kind {
        case "stop":
            let ok = locked { s -> Bool in
                guard let last = s.runs.indices.last else { return false }
                if !s.runs[last].subject && !s.runs.contains(where: \.subject) { s.lateMs = 1000 }
                s.runs[last].outside = true
                return true
            }
            if ok {
                wakeAsked()
                CFRunLoopStop(loop)
            }
        case "wakeUp": wakeUp(loop)
        case "signal":
            guard CFRunLoopSourceIsValid(sources[index]) else { return }
            CFRunLoopSourceSignal(sources[index])
            if wake { wakeUp(loop) }
        case "message":
            guard CFRunLoopSourceIsValid(sources[index]) else { return }
            var one: UInt64 = 1
            _ = write(fds[index], &one, 8)
        case "invalidateSource":
            CFRunLoopSourceInvalidate(sources[index])
            if wake { wakeUp(loop) }
        case "invalidateTimer":
            CFRunLoopTimerInvalidate(timers[index])
            if wake { wakeUp(loop) }
        case "removeSource":
            // As runloopd's API: refused (no wake-up either) for an
            // invalidated source or one not in the mode.
            let mode = cfMode(stimulus.keys?.first ?? "default")
            guard CFRunLoopSourceIsValid(sources[index]), CFRunLoopContainsSource(loop, sources[index], mode) else {
                return
            }
            CFRunLoopRemoveSource(loop, sources[index], mode)
            if wake { wakeUp(loop) }
        case "invalidateObserver": CFRunLoopObserverInvalidate(observers[index])
        case "perform":
            let label = locked { s in
                defer { s.stimulusPerforms += 1 }
                return "x\(s.stimulusPerforms)"
            }
            let action: OracleSetup.Action? = stimulus.stop == true ? .init(kind: "stop") : nil
            if stimulus.block == true {
                queueBlock(label, keys: stimulus.keys ?? ["default"], action: action)
            } else {
                queuePerform(label, keys: stimulus.keys ?? ["default"], action: action)
            }
        case "cancelDelayed":
            if let timer = delayed[index] { CFRunLoopTimerInvalidate(timer) }
        default: break
        }
    }
}

/// Closes a descriptor when the play's objects go.
final class FD {
    let fd: Int32
    init(_ fd: Int32) { self.fd = fd }
    deinit { if fd >= 0 { close(fd) } }
}
