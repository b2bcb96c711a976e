import CoreFoundation
import Foundation
import Testing

@testable import RunLoopCore

/// Selector arguments, durations and names are validated into `RunLoopError`s.
@Suite struct ValidationTests {
    @Test func unknownSelectorIsAnErrorWithItsField() throws {
        try withWorker(options(.manual)) { worker in
            let error = runLoopError { _ = try worker.performCall("nope") }

            #expect(error?.code == "unknown_selector")
            #expect(error?.kind == .badValue)
            #expect(error?.field == "selector")
            #expect(worker.pendingPerforms().isEmpty, "nothing was queued")
            let timer = runLoopError {
                _ = try worker.addTimer(TimerSpec(interval: 1, action: SelectorCall(selector: "nope")))
            }
            #expect(timer?.field == "action")
        }
    }

    @Test(
        arguments: [
            (["ms": "x"], "args.ms"),
            (["ms": 1.5], "args.ms"),
            (["ms": -1], "args.ms"),
            (["ms": 10_001], "args.ms"),
            (["ms": .number(.infinity)], "args.ms"),
            ([:], "args.ms"),
            (["ms": 1, "extra": true], "args.extra"),
        ] as [([String: Value], String)])
    func badSleepArgumentsNameTheField(args: [String: Value], field: String) throws {
        let selectors = SelectorRegistry()

        let error = runLoopError { _ = try selectors.validate(SelectorCall(selector: "sleep", args: args)) }

        #expect(error?.kind == .badValue)
        #expect(error?.code == "bad_value")
        #expect(error?.field == field)
    }

    @Test func validCallsGetTheirDefaults() throws {
        let selectors = SelectorRegistry()
        let count = try selectors.validate(SelectorCall(selector: "count"))
        #expect(count.args == ["name": "default", "by": 1])
        let echo = try selectors.validate(SelectorCall(selector: "echo", args: ["anything": [1, "two"]]))
        #expect(echo.args == ["anything": [1, "two"]])
        let nested = try selectors.validate(SelectorCall(selector: "runNested", args: ["seconds": 0]))
        #expect(nested.args["mode"] == "default")
        #expect(
            runLoopError { _ = try selectors.validate(SelectorCall(selector: "runNested", args: ["seconds": 1e9])) }?
                .field == "args.seconds")
    }

    @Test func anAppCanRegisterItsOwnSelector() throws {
        let (registry, _) = makeRegistry()
        defer { registry.endAll() }
        registry.selectors.register(
            Selector(
                name: "double", summary: "twice n",
                arguments: [ArgumentSpec("n", .integer, required: true, summary: "n")]
            ) {
                context throws(RunLoopError) in
                SelectorOutcome(.number(Double(context.integer("n") * 2)))
            })
        let worker = try registry.createWorker(options(.loop))

        #expect(try value(try worker.performCall("double", ["n": 21]).result) == 42)
        #expect(runLoopError { _ = try worker.performCall("double", ["n": "x"]) }?.field == "args.n")
    }

    @Test func runNestedOnlyOnTheWorkersOwnThread() throws {
        try withWorker(options(.manual)) { worker in
            let error = runLoopError {
                _ = try worker.runNested(mode: .default, seconds: 0.1, returnAfterSourceHandled: false)
            }

            #expect(error?.code == "wrong_thread")
        }
    }

    @Test(arguments: [Double.nan, .infinity, -.infinity, -1, -0.001, 86_400.5, 5e8, 1e10])
    func limitsRejectDurationsCFWouldMisread(seconds: Double) {
        let error = runLoopError { try Limits().checkSeconds(seconds, field: "seconds") }
        #expect(error?.kind == .badValue)
        #expect(error?.field == "seconds")
    }

    @Test func limitsAcceptTheRangeAndHonourPositive() throws {
        let limits = Limits()
        try limits.checkSeconds(0, field: "s")
        try limits.checkSeconds(limits.maxSeconds, field: "s")
        #expect(runLoopError { try limits.checkSeconds(0, field: "interval", positive: true) }?.field == "interval")
        var small = Limits()
        small.maxSeconds = 2
        #expect(runLoopError { try small.checkSeconds(2.5, field: "s") }?.field == "s")
    }

    @Test func everyDurationInTheAPIIsValidated() throws {
        let (registry, _) = makeRegistry()
        defer { registry.endAll() }
        let worker = try registry.createWorker(options(.manual))

        #expect(runLoopError { _ = try worker.addTimer(TimerSpec(interval: .nan)) }?.field == "interval")
        #expect(runLoopError { _ = try worker.addTimer(TimerSpec(interval: 0)) }?.field == "interval")
        #expect(runLoopError { _ = try worker.addTimer(TimerSpec(interval: 1, delay: -1)) }?.field == "delay")
        #expect(
            runLoopError { _ = try worker.addTimer(TimerSpec(interval: 1, tolerance: .infinity)) }?.field == "tolerance"
        )
        #expect(runLoopError { _ = try worker.addTimer(TimerSpec(interval: 1, maxFires: 0)) }?.field == "maxFires")
        #expect(runLoopError { _ = try worker.startRun(seconds: .infinity) }?.field == "seconds")
        #expect(runLoopError { _ = try worker.startRun(seconds: 1e9) }?.field == "seconds")
        #expect(runLoopError { _ = try worker.performCall("echo", afterDelay: .nan) }?.field == "afterDelay")
        #expect(runLoopError { _ = try worker.performCall("echo", timeout: -1) }?.field == "timeout")
        #expect(runLoopError { _ = try worker.performCall("echo", modes: []) }?.field == "modes")
        #expect(runLoopError { _ = try registry.createWorker(options(.loop, seconds: .nan)) }?.field == "run.seconds")
        #expect(runLoopError { _ = try registry.createWorker(options(.loop, mode: .common)) }?.field == "run.mode")
        let other = try RunLoopMode("other")
        #expect(runLoopError { _ = try registry.createWorker(options(.forever, mode: other)) }?.field == "run.mode")
        #expect(runLoopError { _ = try registry.createWorker(options(.loop, name: "")) }?.field == "name")
        #expect(runLoopError { _ = try registry.createWorker(options(.loop, name: "a\nb")) }?.field == "name")
        #expect(runLoopError { _ = try RunLoopMode("has space") }?.field == "mode")
        #expect(worker.snapshot.runs == 0, "nothing ran")
    }

    @Test func otherStylesRefuseManualRuns() throws {
        try withWorker(options(.loop)) { worker in
            #expect(runLoopError { _ = try worker.startRun(seconds: 1) }?.code == "not_manual")
        }
    }

    @Test func maxWorkersIsEnforced() throws {
        var limits = Limits()
        limits.maxWorkers = 2
        let (registry, _) = makeRegistry(limits)
        defer { registry.endAll() }
        _ = try registry.createWorker(options(.manual))
        let second = try registry.createWorker(options(.manual))

        #expect(runLoopError { _ = try registry.createWorker(options(.manual)) }?.code == "too_many_threads")
        _ = second.endAndWait(timeout: 10)
        _ = try registry.createWorker(options(.manual))
    }

    @Test func exitReasonsAreCFsOwnCodes() {
        #expect(ExitReason(CFRunLoopRunResult.finished) == .finished)
        #expect(ExitReason(CFRunLoopRunResult.stopped) == .stopped)
        #expect(ExitReason(CFRunLoopRunResult.timedOut) == .timedOut)
        #expect(ExitReason(CFRunLoopRunResult.handledSource) == .handledSource)
        #expect(ExitReason.allCases.map(\.code) == [1, 2, 3, 4])
        #expect(ExitReason.allCases.map(\.name) == ["finished", "stopped", "timedOut", "handledSource"])
        #expect(ExitReason.allCases.allSatisfy { ExitReason(name: $0.name) == $0 })
    }
}
