import CoreFoundation
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The oracle on the loop's thread: the runs, their turns and callouts, the actions.
extension Player {
    // MARK: - The loop's thread

    func loopThread() {
        let loop = CFRunLoopGetCurrent()!
        self.loop = loop
        build(loop)
        // Building must end well before the first slot (a timer due at
        // slot 1 must find port messages written while building already
        // sent), whenever the run starts: as runloopd's harness checks.
        let builtAt = CFAbsoluteTimeGetCurrent()
        if (builtAt - anchor) * 1000 > q * 1000 - Self.lateMs { late((builtAt - anchor) * 1000) }
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
    func run(_ mode: String, seconds: Double, _ rash: Bool, subject: Bool) {
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
    func lateOffGrid(_ time: Double) {
        let offset = (time - anchor).truncatingRemainder(dividingBy: q) * 1000
        if offset > Self.lateMs && offset < q * 1000 - 2 { late(offset) }
    }

    /// Records a callout in the innermost run's turn; `body` is its work.
    func callout(_ label: String, source: Bool, _ body: () -> Void) {
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

    func act(_ action: OracleSetup.Action?, label: String) {
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

    func makeSource0(order: Int, _ info: SourceInfo) -> CFRunLoopSource {
        var context = CFRunLoopSourceContext()
        context.version = 0
        context.info = Unmanaged.passUnretained(info).toOpaque()
        context.retain = SourceInfo.retain
        context.release = SourceInfo.release
        context.perform = { info in SourceInfo.from(info)?.perform() }
        return CFRunLoopSourceCreate(kCFAllocatorDefault, order, &context)
    }

    func makeSource1(order: Int, _ info: SourceInfo) -> CFRunLoopSource {
        var context = CFRunLoopSourceContext1()
        context.version = 1
        context.info = Unmanaged.passUnretained(info).toOpaque()
        context.retain = SourceInfo.retain
        context.release = SourceInfo.release
        context.getPort = { info in SourceInfo.from(info)?.port ?? -1 }
        context.perform = { info in SourceInfo.from(info)?.perform() }
        return withUnsafeMutablePointer(to: &context) { pointer in
            pointer.withMemoryRebound(to: CFRunLoopSourceContext.self, capacity: 1) {
                CFRunLoopSourceCreate(kCFAllocatorDefault, order, $0)
            }
        }
    }

}
