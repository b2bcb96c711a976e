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
}

/// `eventfd(2)`, reached through the C library (Glibc's module does not import it).
private let eventfdCall: (@convention(c) (UInt32, Int32) -> Int32)? = {
    guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "eventfd") else { return nil }
    return unsafeBitCast(symbol, to: (@convention(c) (UInt32, Int32) -> Int32).self)
}()

private func cfMode(_ name: String) -> CFRunLoopMode {
    switch name {
    case "default": return kCFRunLoopDefaultMode
    case "common": return kCFRunLoopCommonModes
    default:
        var bytes = Array(name.utf8)
        return CFStringCreateWithBytes(nil, &bytes, bytes.count, CFStringBuiltInEncodings.UTF8.rawValue, false)
    }
}

private let activityBits: [String: CFOptionFlags] = [
    "entry": 1 << 0, "beforeTimers": 1 << 1, "beforeSources": 1 << 2, "beforeWaiting": 1 << 5,
    "afterWaiting": 1 << 6, "exit": 1 << 7,
]

/// The info a version-0 or version-1 source's C callbacks reach.
private final class SourceInfo {
    let perform: () -> Void
    let port: Int32
    init(port: Int32 = -1, perform: @escaping () -> Void) {
        self.port = port
        self.perform = perform
    }
    static func from(_ info: UnsafeRawPointer?) -> SourceInfo? {
        info.map { Unmanaged<SourceInfo>.fromOpaque($0).takeUnretainedValue() }
    }
}

// @unchecked: `state` is guarded by `lock`; the CF objects are set up on the
// loop thread before any other thread reads them (the `built` handshake) and
// CF's calls are thread-safe.
private final class Player: @unchecked Sendable {
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
    var keep: [AnyObject] = []
    /// How late past its slot anything may be before the play is not as planned.
    static let lateMs = 8.0

    init(_ setup: OracleSetup) {
        self.setup = setup
        q = setup.quantum
    }

    private func locked<T>(_ body: (inout State) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body(&state)
    }

    private func late(_ ms: Double) { locked { $0.lateMs = max($0.lateMs, ms) } }

    // MARK: - The calling thread

    func play() -> OracleResult {
        anchor = CFAbsoluteTimeGetCurrent()
        let thread = Thread { [self] in loopThread() }
        thread.stackSize = 4 << 20
        thread.start()
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
        for stimulus in setup.stimuli.sorted(by: { $0.slot < $1.slot }) {
            let due = anchor + Double(stimulus.slot) * q
            if waitUntil(due) { break }
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

    /// Waits until `date` unless the loop thread ends first; returns whether it ended.
    @discardableResult
    private func waitUntil(_ date: Double) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        while !state.ended {
            let left = date - CFAbsoluteTimeGetCurrent()
            if left <= 0 { return false }
            _ = lock.wait(until: Date(timeIntervalSinceNow: left))
        }
        return true
    }

    private func apply(_ stimulus: OracleSetup.Stimulus) {
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
            if ok { CFRunLoopStop(loop) }
        case "wakeUp": CFRunLoopWakeUp(loop)
        case "signal":
            guard CFRunLoopSourceIsValid(sources[index]) else { return }
            CFRunLoopSourceSignal(sources[index])
            if wake { CFRunLoopWakeUp(loop) }
        case "message":
            guard CFRunLoopSourceIsValid(sources[index]) else { return }
            var one: UInt64 = 1
            _ = write(fds[index], &one, 8)
        case "invalidateSource":
            CFRunLoopSourceInvalidate(sources[index])
            if wake { CFRunLoopWakeUp(loop) }
        case "invalidateTimer":
            CFRunLoopTimerInvalidate(timers[index])
            if wake { CFRunLoopWakeUp(loop) }
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

    // MARK: - The loop's thread

    private func loopThread() {
        let loop = CFRunLoopGetCurrent()!
        self.loop = loop
        build(loop)
        locked { $0.built = true }
        lock.broadcast()
        let startAt = anchor + Double(setup.startSlot) * q
        if setup.startSlot > 0 { waitUntil(startAt) }
        let now = CFAbsoluteTimeGetCurrent()
        if setup.startSlot > 0 {
            late((now - startAt) * 1000)
        } else if (now - anchor) * 1000 > q * 1000 - Self.lateMs {
            late((now - anchor) * 1000)
        }
        let seconds = setup.deadlineSlot == 0 ? 0 : Double(setup.deadlineSlot) * q - (now - anchor)
        if setup.nested {
            // The host run's only item: a source that runs the setup's run
            // nested, then stops the host.
            var host: CFRunLoopSource?
            let info = SourceInfo { [self] in
                run(setup.runMode, seconds: seconds, setup.returnAfterSourceHandled, subject: true)
                CFRunLoopStop(loop)
                _ = host
            }
            host = makeSource0(order: 0, info)
            CFRunLoopAddSource(loop, host, cfMode("nest-host"))
            CFRunLoopSourceSignal(host)
            run("nest-host", seconds: seconds + 10, false, subject: false)
            CFRunLoopSourceInvalidate(host)
            host = nil
        } else {
            run(setup.runMode, seconds: seconds, setup.returnAfterSourceHandled, subject: true)
        }
        for timer in timers { CFRunLoopTimerInvalidate(timer) }
        for source in sources { CFRunLoopSourceInvalidate(source) }
        for case let timer? in delayed { CFRunLoopTimerInvalidate(timer) }
        for carrier in locked({ $0.carriers.values.map(\.source) }) { CFRunLoopSourceInvalidate(carrier) }
        locked { $0.ended = true }
        lock.broadcast()
    }

    /// One `CFRunLoopRunInMode`, recorded as a run of its own.
    private func run(_ mode: String, seconds: Double, _ rash: Bool, subject: Bool) {
        let start = CFAbsoluteTimeGetCurrent()
        locked { s in
            s.runs.append(
                RunRecord(
                    depth: s.runs.count, subject: subject, start: start, deadline: seconds > 0 ? start + seconds : nil))
        }
        let raw = CFRunLoopRunInMode(cfMode(mode), seconds, rash)
        let end = CFAbsoluteTimeGetCurrent()
        let reason: String
        switch raw {
        case .finished: reason = "finished"
        case .stopped: reason = "stopped"
        case .timedOut: reason = "timedOut"
        case .handledSource: reason = "handledSource"
        default: reason = "unknown \(raw.rawValue)"
        }
        locked { s in
            var record = s.runs.removeLast()
            if var turn = record.open {
                let woke = turn.wokeBy ?? (turn.afterWake ? (reason == "timedOut" ? "timeout" : "wakeup") : "none")
                turn.wokeBy = woke
                record.turns.append(.init(wokeBy: woke, callouts: turn.callouts, end: "exit"))
                record.open = nil
            }
            s.done.append((record, reason, end))
        }
        lateOffGrid(end)
    }

    /// Everything happens on the slot grid: a wake or a return well past a
    /// slot was late (the thread was not scheduled on time).
    private func lateOffGrid(_ time: Double) {
        let offset = (time - anchor).truncatingRemainder(dividingBy: q) * 1000
        if offset > Self.lateMs && offset < q * 1000 - 2 { late(offset) }
    }

    /// Records a callout in the innermost run's turn; `body` is its work.
    private func callout(_ label: String, source: Bool, _ body: () -> Void) {
        locked { s in
            guard let last = s.runs.indices.last, var turn = s.runs[last].open else { return }
            if turn.afterWake && turn.wokeBy == nil && !label.hasPrefix("observer") {
                turn.wokeBy = label
                s.runs[last].open = turn
            }
        }
        body()
        locked { s in
            guard let last = s.runs.indices.last else { return }
            s.runs[last].open?.callouts.append(label)
            if source { s.runs[last].handled.append(label) }
        }
    }

    private func act(_ action: OracleSetup.Action?, label: String) {
        guard let action, let loop else { return }
        switch action.kind {
        case "stop":
            locked { s in
                guard let last = s.runs.indices.last, !s.runs[last].exiting else { return }
                s.runs[last].stopBy = label
            }
            CFRunLoopStop(loop)
        case "runNested":
            run(
                action.mode ?? "default", seconds: Double(action.slots ?? 0) * q,
                action.returnAfterSourceHandled ?? false, subject: false)
        case "signal":
            let source = sources[action.source ?? 0]
            guard CFRunLoopSourceIsValid(source) else { return }
            CFRunLoopSourceSignal(source)
            if action.wakeUp ?? true { CFRunLoopWakeUp(loop) }
        default: break
        }
    }

    private func makeSource0(order: Int, _ info: SourceInfo) -> CFRunLoopSource {
        keep.append(info)
        var context = CFRunLoopSourceContext()
        context.version = 0
        context.info = Unmanaged.passUnretained(info).toOpaque()
        context.perform = { info in SourceInfo.from(info)?.perform() }
        return CFRunLoopSourceCreate(kCFAllocatorDefault, order, &context)
    }

    private func makeSource1(order: Int, _ info: SourceInfo) -> CFRunLoopSource {
        keep.append(info)
        var context = CFRunLoopSourceContext1()
        context.version = 1
        context.info = Unmanaged.passUnretained(info).toOpaque()
        context.getPort = { info in SourceInfo.from(info)?.port ?? -1 }
        context.perform = { info in SourceInfo.from(info)?.perform() }
        return withUnsafeMutablePointer(to: &context) { pointer in
            pointer.withMemoryRebound(to: CFRunLoopSourceContext.self, capacity: 1) {
                CFRunLoopSourceCreate(kCFAllocatorDefault, order, $0)
            }
        }
    }

    private func build(_ loop: CFRunLoop) {
        if setup.trackingIsCommon { CFRunLoopAddCommonMode(loop, cfMode("tracking")) }
        // The turns' tracer: first at afterWaiting and exit, last at beforeWaiting.
        let startAt = anchor + Double(setup.startSlot) * q
        let first = CFRunLoopObserverCreateWithHandler(
            nil, activityBits["entry"]! | activityBits["afterWaiting"]! | activityBits["exit"]!, true, Int.min
        ) { [self] _, activity in
            let now = CFAbsoluteTimeGetCurrent()
            locked { s in
                guard let last = s.runs.indices.last else { return }
                if activity.rawValue == activityBits["entry"]! {
                    // The run asked for entered CF late: what came before was
                    // not seen by it (a wake-up outside a run is dropped).
                    if s.runs[last].subject, now - startAt > Self.lateMs / 1000 {
                        s.lateMs = max(s.lateMs, (now - startAt) * 1000)
                    }
                } else if activity.rawValue == activityBits["exit"]! {
                    s.runs[last].exiting = true
                } else {
                    s.runs[last].open = OpenTurn(afterWake: true, wokeBy: nil)
                    s.runs[last].handled.removeAll()
                    // CF's timeout (a dispatch timer on a background queue)
                    // ends a run at its deadline: a wake well past it means
                    // that timer came late and something else woke the loop.
                    if let deadline = s.runs[last].deadline, now - deadline > Self.lateMs / 1000 {
                        s.lateMs = max(s.lateMs, (now - deadline) * 1000)
                    }
                }
            }
            if activity.rawValue == activityBits["afterWaiting"]! { lateOffGrid(now) }
        }
        let lastObserver = CFRunLoopObserverCreateWithHandler(nil, activityBits["beforeWaiting"]!, true, Int.max) {
            [self] _, _ in
            locked { s in
                guard let last = s.runs.indices.last, var turn = s.runs[last].open else { return }
                if turn.afterWake && turn.wokeBy == nil { turn.wokeBy = "wakeup" }
                s.runs[last].turns.append(.init(wokeBy: turn.wokeBy ?? "none", callouts: turn.callouts, end: "sleep"))
                s.runs[last].open = nil
            }
        }
        for mode in ["default", "tracking", "nest-empty", "nest-host"] {
            CFRunLoopAddObserver(loop, first, cfMode(mode))
            CFRunLoopAddObserver(loop, lastObserver, cfMode(mode))
        }
        switch setup.keepAlive {
        case "port":
            let fd = eventfdCall?(0, 0) ?? -1
            keep.append(FD(fd))
            let info = SourceInfo(port: fd) {}
            CFRunLoopAddSource(loop, makeSource1(order: 0, info), kCFRunLoopDefaultMode)
        case "timer":
            let timer = CFRunLoopTimerCreateWithHandler(nil, CFAbsoluteTimeGetCurrent() + 86_400, 86_400, 0, 0) { _ in }
            CFRunLoopAddTimer(loop, timer, kCFRunLoopDefaultMode)
            keep.append(timer as AnyObject)
        default: break
        }
        for key in ["default", "common", "tracking"] {
            let info = SourceInfo { [self] in carrierRoutine(key) }
            let source = makeSource0(order: 0, info)
            state.carriers[key] = Carrier(source: source)
        }
        for (index, plan) in setup.timers.enumerated() {
            let date = anchor + Double(plan.firstSlot) * q
            let interval = Double(plan.intervalSlots ?? 0) * q
            let timer = CFRunLoopTimerCreateWithHandler(nil, date, interval, 0, 0) { [self] timer in
                let label = "timer t\(index)"
                callout(label, source: false) {
                    let fires = locked { s in
                        s.timerFires[index, default: 0] += 1
                        return s.timerFires[index]!
                    }
                    // runloopd invalidates a timer at its last fire before its action.
                    if let max = plan.maxFires, fires >= max { CFRunLoopTimerInvalidate(timer) }
                    act(plan.action, label: label)
                }
            }!
            CFRunLoopTimerSetTolerance(timer, 0)
            for mode in plan.modes { CFRunLoopAddTimer(loop, timer, cfMode(mode)) }
            if plan.invalidated { CFRunLoopTimerInvalidate(timer) }
            timers.append(timer)
        }
        for (index, plan) in setup.sources.enumerated() {
            let source: CFRunLoopSource
            if plan.port {
                let fd = eventfdCall?(0, 0) ?? -1
                fds.append(fd)
                source = makeSource1(
                    order: plan.order,
                    SourceInfo(port: fd) { [self] in
                        callout("port s\(index)", source: true) { act(plan.action, label: "port s\(index)") }
                    })
            } else {
                fds.append(-1)
                source = makeSource0(
                    order: plan.order,
                    SourceInfo { [self] in
                        callout("source s\(index)", source: true) { act(plan.action, label: "source s\(index)") }
                    })
            }
            sources.append(source)
            for mode in plan.modes { CFRunLoopAddSource(loop, source, cfMode(mode)) }
            for _ in 0..<plan.messages {
                var one: UInt64 = 1
                _ = write(fds[index], &one, 8)
            }
            if plan.signalled {
                CFRunLoopSourceSignal(source)
                if plan.wakeUp { CFRunLoopWakeUp(loop) }
            }
        }
        for (index, plan) in setup.performs.enumerated() {
            let label = "p\(index)"
            if let slot = plan.delaySlot {
                let timer = CFRunLoopTimerCreateWithHandler(nil, anchor + Double(slot) * q, 0, 0, 0) { [self] _ in
                    callout("perform \(label)", source: false) { act(plan.action, label: "perform \(label)") }
                }!
                CFRunLoopTimerSetTolerance(timer, 0)
                for key in plan.keys { CFRunLoopAddTimer(loop, timer, cfMode(key)) }
                if plan.cancelled { CFRunLoopTimerInvalidate(timer) }
                delayed.append(timer)
            } else if plan.block == true {
                delayed.append(nil)
                queueBlock(label, keys: plan.keys, action: plan.action)
            } else {
                delayed.append(nil)
                queuePerform(label, keys: plan.keys, action: plan.action)
            }
        }
        for (index, plan) in setup.observers.enumerated() {
            let bits = plan.activities.compactMap { activityBits[$0] }.reduce(0, |)
            let observer = CFRunLoopObserverCreateWithHandler(nil, bits, plan.repeats, plan.order) { [self] _, _ in
                callout("observer o\(index)", source: false) { act(plan.action, label: "observer o\(index)") }
            }
            CFRunLoopAddObserver(loop, observer, cfMode(plan.mode))
            keep.append(observer as AnyObject)
        }
    }

    // MARK: - Performs

    /// Queues a perform for `keys` (any thread): each key's carrier is added
    /// to its mode if it is not there, signalled if it is not, the loop woken.
    private func queuePerform(_ label: String, keys: [String], action: OracleSetup.Action?) {
        guard let loop else { return }
        let (adds, signals) = locked { s -> ([(CFRunLoopSource, String)], [CFRunLoopSource]) in
            s.lastSeq += 1
            s.pending.append(Pending(seq: s.lastSeq, label: label, keys: keys, action: action))
            var adds: [(CFRunLoopSource, String)] = []
            var signals: [CFRunLoopSource] = []
            for key in keys {
                guard var carrier = s.carriers[key] else { continue }
                if !carrier.inLoop {
                    carrier.inLoop = true
                    carrier.signalled = true
                    adds.append((carrier.source, key))
                } else if !carrier.signalled {
                    carrier.signalled = true
                    signals.append(carrier.source)
                }
                s.carriers[key] = carrier
            }
            return (adds, signals)
        }
        for (source, key) in adds {
            CFRunLoopAddSource(loop, source, cfMode(key))
            CFRunLoopSourceSignal(source)
            CFRunLoopWakeUp(loop)
        }
        for source in signals { CFRunLoopSourceSignal(source) }
        if !signals.isEmpty { CFRunLoopWakeUp(loop) }
    }

    /// Queues a block perform for `keys` (any thread), as Foundation's
    /// `RunLoop.perform(inModes:block:)` does: `CFRunLoopPerformBlock` with
    /// the mode name (one key) or an array of them (CF keeps it as a set:
    /// the block runs once), then `CFRunLoopWakeUp`, which CF leaves to the
    /// caller. CF runs it in `__CFRunLoopDoBlocks`; it is never a handled source.
    private func queueBlock(_ label: String, keys: [String], action: OracleSetup.Action?) {
        guard let loop else { return }
        let block: () -> Void = { [self] in
            callout("perform \(label)", source: false) { act(action, label: "perform \(label)") }
        }
        let names = keys.map(cfMode)
        if names.count == 1 {
            CFRunLoopPerformBlock(loop, names[0], block)
        } else {
            var values: [UnsafeRawPointer?] = names.map { UnsafeRawPointer(Unmanaged.passUnretained($0).toOpaque()) }
            var callbacks = kCFTypeArrayCallBacks
            let array = withExtendedLifetime(names) { CFArrayCreate(nil, &values, values.count, &callbacks) }
            CFRunLoopPerformBlock(loop, array, block)
        }
        CFRunLoopWakeUp(loop)
    }

    /// The carrier's perform routine for `key` (the loop's thread).
    private func carrierRoutine(_ key: String) {
        let bound = locked { s in
            s.carriers[key]?.signalled = false
            return s.lastSeq
        }
        while let next = locked({ s -> Pending? in
            guard let index = s.pending.firstIndex(where: { $0.seq <= bound && $0.keys.contains(key) }) else {
                return nil
            }
            return s.pending.remove(at: index)
        }) {
            retire(next.keys.filter { $0 != key })
            callout("perform \(next.label)", source: true) { act(next.action, label: "perform \(next.label)") }
        }
        retire([key])
    }

    /// Takes out of its mode each of `keys`' carriers no pending perform needs.
    private func retire(_ keys: [String]) {
        guard let loop else { return }
        let gone = locked { s -> [(CFRunLoopSource, String)] in
            var gone: [(CFRunLoopSource, String)] = []
            for key in keys {
                guard var carrier = s.carriers[key], carrier.inLoop,
                    !s.pending.contains(where: { $0.keys.contains(key) })
                else { continue }
                carrier.inLoop = false
                carrier.signalled = false
                s.carriers[key] = carrier
                gone.append((carrier.source, key))
            }
            return gone
        }
        for (source, key) in gone { CFRunLoopRemoveSource(loop, source, cfMode(key)) }
    }
}

/// Closes a descriptor when the play's objects go.
private final class FD {
    let fd: Int32
    init(_ fd: Int32) { self.fd = fd }
    deinit { if fd >= 0 { close(fd) } }
}
