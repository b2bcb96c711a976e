import RunLoopCore
import Testing

@testable import runloopd

/// The loop budgets' flags (issue 37): defaults, variables, bounds.
@Suite("Loop budget options")
struct LoopBudgetOptionsTests {
    @Test("--max-nesting and --max-nest-cpu reach the engine's limits, by flag or variable")
    func reachTheEngine() throws {
        let defaults = try parseServe(["--no-store"]).serviceConfiguration(token: nil).limits
        #expect(defaults.maxNesting == 128 && defaults.maxNestCPUSeconds == 2)
        #expect(defaults.threadStackBytes == 2 * 1024 * 1024 + 128 * 64 * 1024)
        let flags = try parseServe(["--no-store", "--max-nesting", "16", "--max-nest-cpu", "0.5"])
            .serviceConfiguration(token: nil).limits
        #expect(flags.maxNesting == 16 && flags.maxNestCPUSeconds == 0.5)
        let variables = try parseServe(
            ["--no-store"], environment: ["RUNLOOPD_MAX_NESTING": "300", "RUNLOOPD_MAX_NEST_CPU": "5s"]
        ).serviceConfiguration(token: nil).limits
        #expect(variables.maxNesting == 300 && variables.maxNestCPUSeconds == 5)
    }

    @Test("--max-predict-steps reaches the engine's limits, by flag or variable")
    func predictSteps() throws {
        let defaults = try parseServe(["--no-store"]).serviceConfiguration(token: nil).limits
        #expect(defaults.maxPredictSteps == 500_000 && defaults.maxPredictSteps == PredictBudget.perCall)
        let flags = try parseServe(["--no-store", "--max-predict-steps", "1000"]).serviceConfiguration(token: nil)
        #expect(flags.limits.maxPredictSteps == 1000)
        let variables = try parseServe(["--no-store"], environment: ["RUNLOOPD_MAX_PREDICT_STEPS": "2000000"])
            .serviceConfiguration(token: nil).limits
        #expect(variables.maxPredictSteps == 2_000_000)
    }

    @Test("out-of-range budgets are refused at start, naming the flag")
    func bounds() {
        for arguments in [
            ["--max-nesting", "0"], ["--max-nesting", "1025"], ["--max-nest-cpu", "0"], ["--max-nest-cpu", "2h"],
            ["--max-predict-steps", "999"], ["--max-predict-steps", "100000001"],
        ] {
            let refused = refusal(["--no-store"] + arguments)
            #expect(refused?.message.contains(arguments[0]) == true, "\(arguments): \(String(describing: refused))")
        }
    }
}
