import CoreFoundation
import Foundation

/// The selectors every runloopd has.
enum BuiltinSelectors {
    static func all(limits: Limits) -> [Selector] {
        [
            Selector(
                name: "echo", summary: "Returns its arguments unchanged.", acceptsAnyArguments: true
            ) { context throws(RunLoopError) in
                SelectorOutcome(.object(context.args))
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
                throw RunLoopError(kind: .failed, code: "selector_failed", message: context.string("message"))
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
                    throw RunLoopError(kind: .failed, code: "no_registry", message: "this worker has no registry")
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
