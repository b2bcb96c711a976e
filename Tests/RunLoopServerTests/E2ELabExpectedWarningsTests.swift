import Foundation
import RunLoopCore
import RunLoopTestSupport
import Testing

@testable import RunLoopServer

/// Warnings an experiment causes on purpose (issue 39): `expectedWarnings`
/// lists their codes with why; `runloopd play` shows such a warning as
/// expected by the experiment, with the reason, and any other warning on the
/// experiment's threads as a warning.
@Suite("E2E lab: warnings an experiment causes on purpose")
struct E2ELabExpectedWarningsTests {
    static func parse(_ text: String) throws(RunLoopError) -> Experiment {
        try Experiment(try JSON.parse(Array(text.utf8)), fallbackId: "x")
    }

    static func problem(_ declared: String) -> String? {
        do throws(RunLoopError) {
            _ = try parse(
                #"{"title": "t", "steps": [{"request": {"path": "/api/threads"}}], "expectedWarnings": "# + declared
                    + "}")
            return nil
        } catch {
            return error.message
        }
    }

    @Test("expectedWarnings: a list of {code, reason}, each a warning runloopd raises, once")
    func format() throws {
        let parsed = try Self.parse(
            #"""
            {"title": "t", "steps": [{"request": {"path": "/api/threads"}}],
             "expectedWarnings": [{"code": "stall", "reason": "step 3 sleeps 400 ms"},
                                  {"code": "timer_behind", "reason": "the timer waits"}]}
            """#)
        #expect(
            parsed.expectedWarnings == [
                .init(code: "stall", reason: "step 3 sleeps 400 ms"),
                .init(code: "timer_behind", reason: "the timer waits"),
            ])
        #expect(parsed.expectedReason("stall") == "step 3 sleeps 400 ms")
        #expect(parsed.expectedReason("lost_wakeup") == nil)
        #expect(try Self.parse(#"{"title": "t", "steps": [{"request": {"path": "/api/x"}}]}"#).expectedWarnings.isEmpty)
        #expect(Self.problem("[]") == nil)

        #expect(Self.problem(#"{"code": "stall"}"#) == "expectedWarnings must be a list")
        #expect(
            Self.problem(#"["stall"]"#)?.contains("expectedWarnings.0 must be an object with code and reason") == true)
        #expect(
            Self.problem(#"[{"code": "stal", "reason": "r"}]"#)?.contains("expectedWarnings.0.code must be one of")
                == true)
        #expect(Self.problem(#"[{"reason": "r"}]"#)?.contains("expectedWarnings.0.code must be one of") == true)
        #expect(Self.problem(#"[{"code": "stall"}]"#)?.contains("expectedWarnings.0.reason must say why") == true)
        #expect(Self.problem(#"[{"code": "stall", "reason": "  "}]"#)?.contains("reason must say why") == true)
        #expect(
            Self.problem(#"[{"code": "stall", "reason": "r", "step": 3}]"#)?.contains(
                "expectedWarnings.0.step is not a field")
                == true)
        #expect(
            Self.problem(#"[{"code": "stall", "reason": "r"}, {"code": "stall", "reason": "s"}]"#)?.contains(
                "expectedWarnings.1: stall is declared twice") == true)
    }

    @Test("the shipped experiments that raise warnings on purpose declare them")
    func shippedDeclarations() throws {
        let dir = E2EPaths.packageRoot.appendingPathComponent("experiments").path
        let loaded = Dictionary(
            uniqueKeysWithValues: try ExperimentFiles.load(dir).map { ($0.experiment.id, $0.experiment) })
        // Each of these, played, raised the code (a deliberate handler sleep, a signal without a wake-up, …).
        let raised = [
            "testdemo4-signal-with-and-without-wakeup": "stall", "timer-due-during-a-handler": "stall",
            "idle-task-one-per-turn": "stall", "adding-a-source0-does-not-wake": "lost_wakeup",
            "late-timer-skips-missed-fires": "timer_behind", "perform-after-delay-on-idle-loop": "perform_on_idle_loop",
            "afnetworking2-network-thread-port": "empty_mode_asleep",
        ]
        for (id, code) in raised {
            #expect(loaded[id]?.expectedReason(code)?.isEmpty == false, "\(id) declares \(code)")
        }
    }

    /// A handler that blocks its loop 300 ms: a `stall` (hang) on the thread it made.
    static func sleeper(declared: Bool) -> String {
        let declaration =
            declared
            ? #", "expectedWarnings": [{"code": "stall", "reason": "step 2's handler sleeps 300 ms on purpose"}]"# : ""
        return """
            {"title": "a handler that sleeps"\(declaration), "steps": [
              {"request": {"method": "POST", "path": "/api/threads", "body": {"run": {"style": "manual"}}},
               "capture": {"t": "id"}, "expect": {"status": 201}},
              {"request": {"method": "POST", "path": "/api/threads/${t}/sources",
                           "body": {"kind": "custom", "action": {"selector": "sleep", "args": {"ms": 300}}}},
               "capture": {"s": "id"}, "expect": {"status": 201}},
              {"request": {"method": "POST", "path": "/api/threads/${t}/sources/${s}/signal", "body": {"wakeup": false}},
               "expect": {"status": 200}},
              {"request": {"method": "POST", "path": "/api/threads/${t}/run",
                           "body": {"seconds": 2, "returnAfterSourceHandled": true}},
               "expect": {"status": 200, "json": {"exitReason": "handledSource"}}},
              {"request": {"method": "GET", "path": "/api/warnings?thread=${t}&code=stall"},
               "expect": {"json": {"warnings.0.code": "stall"}}, "until": {"timeout": 5}}
            ]}
            """
    }

    static func play(_ text: String) async throws -> (status: Int32, output: String) {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent(
            "runloopd-expected-\(getpid())-\(UInt64.random(in: 0..<UInt64.max)).json")
        try Data(text.utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let (status, output) = try await ServerProcess.runToExit(["play", file.path], timeout: 60)
        return (status ?? -1, output)
    }

    @Test("runloopd play: a declared warning shows as expected, with why; an undeclared one as a warning")
    func playShowsThem() async throws {
        let declared = try await Self.play(Self.sleeper(declared: true))
        #expect(declared.status == 0, "\(declared.output)")
        #expect(
            declared.output.contains("· expected by this experiment: stall ("), "\(declared.output)")
        #expect(declared.output.contains("— step 2's handler sleeps 300 ms on purpose"), "\(declared.output)")
        #expect(!declared.output.contains("⚠ warning stall"), "\(declared.output)")

        let undeclared = try await Self.play(Self.sleeper(declared: false))
        #expect(undeclared.status == 0, "\(undeclared.output)")
        #expect(undeclared.output.contains("⚠ warning stall ("), "\(undeclared.output)")
        #expect(undeclared.output.contains("blocked the loop"), "\(undeclared.output)")
        #expect(!undeclared.output.contains("expected by this experiment"), "\(undeclared.output)")
    }
}
