import CoreFoundation
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The setup built with raw CF calls on the loop's thread.
extension Player {
    func build(_ loop: CFRunLoop) {
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
                    // Woken well after a stop or wake-up made while it slept:
                    // this thread was off the CPU (`wakeAsked`).
                    if let asked = s.wakeAskedAt, now - asked > Self.lateMs / 1000 {
                        s.lateMs = max(s.lateMs, (now - asked) * 1000)
                    }
                    s.asleep = false
                    s.wakeAskedAt = nil
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
                s.asleep = true
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
                // How far behind the fire date CF had set it fires (as
                // runloopd's timers measure it): a loop thread held off the
                // CPU about a quantum is off no grid, but its timers are late.
                // (One due before a run that starts later is late by design.)
                if plan.firstSlot > setup.startSlot {
                    late((CFAbsoluteTimeGetCurrent() - CFRunLoopTimerGetNextFireDate(timer)) * 1000)
                }
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
            // A C callout with an info CF does not own, not a block: a stimulus
            // invalidates the observer from another thread, and CF releases a
            // block's context at once, even while its callout runs (runloopd's
            // ObserverRecord says more). `keep` holds the info until the
            // loop's thread has exited.
            let info = SourceInfo { [self] in
                callout("observer o\(index)", source: false) { act(plan.action, label: "observer o\(index)") }
            }
            keep.append(info)
            var context = CFRunLoopObserverContext(
                version: 0, info: Unmanaged.passUnretained(info).toOpaque(), retain: nil, release: nil,
                copyDescription: nil)
            let observer = CFRunLoopObserverCreate(
                nil, bits, plan.repeats, plan.order,
                { _, _, info in SourceInfo.from(info)?.perform() }, &context)
            CFRunLoopAddObserver(loop, observer, cfMode(plan.mode))
            observers.append(observer!)
        }
    }

}
