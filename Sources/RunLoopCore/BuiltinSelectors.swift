import CLinux
import CoreFoundation
import Foundation
import Primitives
import Synchronization

/// The selectors every runloopd has.
enum BuiltinSelectors {
    static func all(limits: Limits) -> [Selector] {
        [
            Selector(
                name: "echo",
                summary:
                    "Returns its arguments unchanged (as a port source's action, with the message it handles: message {msgid, data}).",
                acceptsAnyArguments: true
            ) { context throws(RunLoopError) in
                var value = context.args
                if let message = context.message {
                    value["message"] = ["msgid": .number(Double(message.msgid)), "data": .string(message.data)]
                }
                return SelectorOutcome(.object(value))
            },
            Selector(
                name: "log", summary: "Appends a line to the thread's log.",
                arguments: [ArgumentSpec("message", .string, required: true, maximum: 1024, summary: "the line")]
            ) { context throws(RunLoopError) in
                let lines = context.worker.appendLog(context.string("message"))
                return SelectorOutcome(["lines": .number(Double(lines))])
            },
            Selector(
                name: "sleep", summary: "Blocks the thread for ms milliseconds: shows a busy loop.",
                arguments: [
                    ArgumentSpec(
                        "ms", .integer, required: true, minimum: 0, maximum: Double(limits.maxSleepMillis),
                        summary: "milliseconds to block")
                ]
            ) { context throws(RunLoopError) in
                let ms = context.integer("ms")
                var request = timespec(tv_sec: ms / 1000, tv_nsec: (ms % 1000) * 1_000_000)
                var remaining = timespec()
                while nanosleep(&request, &remaining) != 0 && errno == EINTR { request = remaining }
                return SelectorOutcome(["sleptMs": .number(Double(ms))])
            },
            Selector(
                name: "spin", summary: "Burns us microseconds of CPU on the thread.",
                arguments: [
                    ArgumentSpec(
                        "us", .integer, required: true, minimum: 0, maximum: Double(limits.maxSpinMicros),
                        summary: "microseconds of CPU to burn")
                ]
            ) { context throws(RunLoopError) in
                let until = Monotonic.now() + Double(context.integer("us")) / 1e6
                var turns = 0
                while Monotonic.now() < until { turns &+= 1 }
                return SelectorOutcome([
                    "spunUs": .number(Double(context.integer("us"))), "turns": .number(Double(turns)),
                ])
            },
            Selector(
                name: "count", summary: "Adds by (default 1) to the thread's counter name; returns the new value.",
                arguments: [
                    ArgumentSpec("name", .string, maximum: 64, defaultValue: "default", summary: "counter name"),
                    ArgumentSpec(
                        "by", .integer, minimum: -1_000_000, maximum: 1_000_000, defaultValue: 1, summary: "increment"),
                ]
            ) { context throws(RunLoopError) in
                let value = context.worker.increment(context.string("name"), by: context.integer("by"))
                return SelectorOutcome(["name": .string(context.string("name")), "value": .number(Double(value))])
            },
            Selector(
                name: "step",
                summary:
                    "Adds 1 to counter name and reports finished once it reaches until (an idle task that runs over several turns).",
                arguments: [
                    ArgumentSpec("name", .string, maximum: 64, defaultValue: "steps", summary: "counter name"),
                    ArgumentSpec("until", .integer, required: true, minimum: 1, maximum: 1_000_000, summary: "target"),
                ]
            ) { context throws(RunLoopError) in
                let value = context.worker.increment(context.string("name"))
                let until = context.integer("until")
                return SelectorOutcome(["value": .number(Double(value))], finished: value >= until)
            },
            Selector(
                name: "whereAmI",
                summary:
                    "Answers the OS thread it runs on: tid (gettid), name (the OS thread's name), thread (the runloopd thread whose loop ran it) and onLoopThread (true when that is the loop's own OS thread)."
            ) { context throws(RunLoopError) in
                let tid = clinux_gettid()
                // The kernel's name for the calling thread (what ps -L shows).
                let comm = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
                let name = comm.trimmingCharacters(in: .newlines)
                return SelectorOutcome([
                    "tid": .number(Double(tid)), "name": .string(name), "thread": .string(context.worker.id),
                    "onLoopThread": .bool(tid == context.worker.osThreadId.load(ordering: .relaxed)),
                ])
            },
            Selector(
                name: "stop", summary: "Calls CFRunLoopStop on the thread's own loop from inside a handler."
            ) { context throws(RunLoopError) in
                context.worker.stopSelectorRan()
                CFRunLoopStop(CFRunLoopGetCurrent())
                return SelectorOutcome(["stopped": true])
            },
            Selector(
                name: "fail", summary: "Returns an error (to see how failures are reported).",
                arguments: [
                    ArgumentSpec(
                        "message", .string, maximum: 1024, defaultValue: "failed on purpose", summary: "the error text")
                ]
            ) { context throws(RunLoopError) in
                throw RunLoopError(kind: .failed, code: .selectorFailed, message: context.string("message"))
            },
            Selector(
                name: "send", summary: "Writes a message to another thread's port source (source1 on an eventfd).",
                arguments: [
                    ArgumentSpec("thread", .string, required: true, maximum: 32, summary: "target thread id"),
                    ArgumentSpec("source", .string, required: true, maximum: 32, summary: "target port source id"),
                    ArgumentSpec(
                        "msgid", .integer, minimum: 0, maximum: 2_147_483_647, defaultValue: 0, summary: "message id"),
                    ArgumentSpec(
                        "data", .string, maximum: Double(limits.maxMessageBytes), defaultValue: "", summary: "payload"),
                ]
            ) { context throws(RunLoopError) in
                guard let registry = context.registry else {
                    throw RunLoopError(kind: .failed, code: .noRegistry, message: "this worker has no registry")
                }
                let target = try registry.worker(context.string("thread"))
                let snapshot = try target.sendMessage(
                    toSource: context.string("source"), msgid: context.integer("msgid"), data: context.string("data"))
                return SelectorOutcome([
                    "thread": .string(target.id), "source": .string(snapshot.id),
                    "queued": .number(Double(snapshot.queued)),
                ])
            },
            Selector(
                name: "signal",
                summary:
                    "CFRunLoopSourceSignal on a custom source of this or another thread, then CFRunLoopWakeUp unless wakeup is false.",
                arguments: [
                    ArgumentSpec("thread", .string, maximum: 32, summary: "target thread id (default: this thread)"),
                    ArgumentSpec("source", .string, required: true, maximum: 32, summary: "target custom source id"),
                    ArgumentSpec("wakeup", .boolean, defaultValue: true, summary: "also wake the target loop"),
                ]
            ) { context throws(RunLoopError) in
                let target = try context.otherWorker(context.args["thread"]?.string)
                let snapshot = try target.signalSource(context.string("source"), wakeUp: context.bool("wakeup"))
                return SelectorOutcome([
                    "thread": .string(target.id), "source": .string(snapshot.id),
                    "wakeup": .bool(context.bool("wakeup")), "signalled": .bool(snapshot.signalled),
                ])
            },
            Selector(
                name: "performOn",
                summary:
                    "performSelector:onThread: from a handler: queues selector (with args) on another thread's loop, optionally waiting for it (waitUntilDone, at most timeout seconds) or after a delay.",
                arguments: [
                    ArgumentSpec("thread", .string, required: true, maximum: 32, summary: "target thread id"),
                    ArgumentSpec("selector", .string, required: true, maximum: 64, summary: "the selector to perform"),
                    ArgumentSpec("args", .object, summary: "its arguments"),
                    ArgumentSpec(
                        "modes", .stringList, maximum: 16,
                        summary: "modes it may run in (default: common, or default with afterDelay)"),
                    ArgumentSpec("waitUntilDone", .boolean, defaultValue: false, summary: "block until it ran"),
                    ArgumentSpec(
                        "afterDelay", .number, minimum: 0, maximum: limits.maxSeconds,
                        summary: "seconds: a one-shot timer on the target (performSelector:withObject:afterDelay:)"),
                    ArgumentSpec(
                        "timeout", .number, minimum: 0, maximum: 60, defaultValue: 5,
                        summary: "longest wait with waitUntilDone, seconds"),
                ]
            ) { context throws(RunLoopError) in
                try PerformOn.run(context)
            },
            Selector(
                name: "runNested",
                summary: "Runs the loop recursively in mode for seconds and returns that run's own exit reason.",
                arguments: [
                    ArgumentSpec("mode", .string, maximum: 64, defaultValue: "default", summary: "mode to run in"),
                    ArgumentSpec(
                        "seconds", .number, required: true, minimum: 0, maximum: limits.maxSeconds,
                        summary: "run timeout"),
                    ArgumentSpec(
                        "returnAfterSourceHandled", .boolean, defaultValue: false,
                        summary: "return after one handled source"),
                ]
            ) { context throws(RunLoopError) in
                let mode = try RunLoopMode(context.string("mode"))
                let exit = try context.worker.runNested(
                    mode: mode, seconds: context.number("seconds"),
                    returnAfterSourceHandled: context.bool("returnAfterSourceHandled"))
                return SelectorOutcome([
                    "exitReason": .string(exit.reason.name), "code": .number(Double(exit.reason.code)),
                    "mode": .string(exit.mode), "durationMs": .number(exit.duration * 1000),
                    "depth": .number(Double(exit.depth)),
                ])
            },
        ]
    }
}

extension SelectorContext {
    /// The worker named `id` (this one when nil).
    func otherWorker(_ id: String?) throws(RunLoopError) -> Worker {
        guard let id, id != worker.id else { return worker }
        guard let registry else {
            throw RunLoopError(kind: .failed, code: .noRegistry, message: "this worker has no registry")
        }
        return try registry.worker(id)
    }
}

/// The `performOn` selector: a perform queued from a handler.
enum PerformOn {
    static func run(_ context: SelectorContext) throws(RunLoopError) -> SelectorOutcome {
        let target = try context.otherWorker(context.string("thread"))
        var modes: [RunLoopMode]?
        if let names = context.strings("modes") {
            modes = []
            for name in names { modes?.append(try RunLoopMode(name)) }
        }
        let call = SelectorCall(selector: context.string("selector"), args: context.object("args"))
        let afterDelay = context.args["afterDelay"]?.number
        let spec = PerformSpec(call: call, modes: modes, afterDelay: afterDelay)
        guard context.bool("waitUntilDone") else {
            let performId = try target.perform(spec)
            return SelectorOutcome(["performId": .string(performId), "thread": .string(target.id), "waited": false])
        }
        if target === context.worker && afterDelay == nil {
            // Cocoa runs it at once when the target is the current thread.
            let result = try target.runSelectorNow(call)
            return SelectorOutcome(["thread": .string(target.id), "waited": true, "result": result])
        }
        let answer = Locked<PerformResult?>(nil)
        let performId = try target.perform(spec) { result in
            answer.withLock { $0 = result }
            answer.notifyAll()
        }
        let timeout = context.number("timeout")
        guard let result = answer.withLock(when: { $0 != nil }, timeout: timeout, { result, _ in result }) else {
            throw RunLoopError(
                kind: .failed, code: .waitPassed,
                message: "perform \(performId) on \(target.id) did not finish within \(timeout) s (it stays queued)")
        }
        switch result.outcome {
        case .success(let value):
            return SelectorOutcome([
                "performId": .string(performId), "thread": .string(target.id), "waited": true, "result": value,
            ])
        case .failure(let error):
            throw error
        }
    }
}
