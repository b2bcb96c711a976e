import Foundation
import RunLoopCore
import RunLoopTestSupport
import Testing

@testable import RunLoopServer

/// Experiments at a learner's pace (issue 39): `runloopd play --pace S`
/// pauses before each step as a learner pressing Step would, never inside a
/// group of steps joined by `withNext`. The same experiment, whose first step
/// arms a one-shot timer for the run of the second, fails at that pace when
/// the two are apart (the timer is overdue when the run starts and fires at
/// once) and passes when they are joined.
@Suite("E2E lab: experiments at a learner's pace")
struct E2ELabPaceTests {
    /// A manual thread; a one-shot timer in 0.6 s; a 0.3 s run that must end
    /// before the timer fires (it times out, no fire); the timer fires later.
    static func experiment(joined: Bool) -> String {
        """
        {"title": "a timer armed for the next run", "steps": [
          {"say": "A manual thread kept alive by a port.",
           "request": {"method": "POST", "path": "/api/threads", "body": {"run": {"style": "manual"}}},
           "capture": {"t": "id"}, "expect": {"status": 201}},
          {"say": "A one-shot timer in 0.6 s.", "withNext": \(joined),
           "request": {"method": "POST", "path": "/api/threads/${t}/timers",
                       "body": {"delay": 0.6, "interval": 0.6, "repeats": false}},
           "capture": {"tm": "id"}, "expect": {"status": 201}},
          {"say": "A 0.3 s run.", "then": "It times out before the timer is due.",
           "request": {"method": "POST", "path": "/api/threads/${t}/run", "body": {"seconds": 0.3}},
           "expect": {"status": 200, "json": {"exitReason": "timedOut", "cause.timerFires": 0}}},
          {"say": "Clean up.", "request": {"method": "DELETE", "path": "/api/threads/${t}"},
           "expect": {"status": 200}}
        ]}
        """
    }

    static func play(_ text: String, pace: Double) async throws -> (status: Int32, output: String) {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent(
            "runloopd-pace-\(getpid())-\(UInt64.random(in: 0..<UInt64.max)).json")
        try Data(text.utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let (status, output) = try await ServerProcess.runToExit(
            ["play", file.path, "--pace", "\(pace)"], timeout: 60)
        return (status ?? -1, output)
    }

    @Test("--pace pauses between groups, not inside one: joined, the timer counts from the run it aims at")
    func paceAndGroups() async throws {
        let apart = try await Self.play(Self.experiment(joined: false), pace: 1)
        #expect(apart.status == 1, "\(apart.output)")
        #expect(apart.output.contains("cause.timerFires"), "\(apart.output)")
        let joined = try await Self.play(Self.experiment(joined: true), pace: 1)
        #expect(joined.status == 0, "\(joined.output)")
        // Back to back, both hold.
        #expect(try await Self.play(Self.experiment(joined: false), pace: 0).status == 0)
    }

    @Test("withNext must be a flag and never on the last step; then must be text")
    func fieldsChecked() throws {
        func problem(_ steps: String) -> String? {
            let text = #"{"title": "t", "steps": "# + steps + "}"
            do throws(RunLoopError) {
                _ = try Experiment(try JSON.parse(Array(text.utf8)), fallbackId: "x")
                return nil
            } catch {
                return error.message
            }
        }
        let get = #""request": {"path": "/api/threads"}"#
        #expect(problem("[{\(get), \"withNext\": true}, {\(get), \"then\": \"ok\"}]") == nil)
        #expect(problem("[{\(get), \"withNext\": true}]")?.contains("the last step has no next") == true)
        #expect(problem("[{\(get), \"withNext\": 1}, {\(get)}]")?.contains("withNext must be true or false") == true)
        #expect(problem("[{\(get), \"then\": 3}]")?.contains("then must be a string") == true)
        let text = #"""
            {"title": "t", "steps": [
              {"say": "a", "then": "b", "withNext": true, "request": {"path": "/api/threads"}},
              {"request": {"path": "/api/threads"}}]}
            """#
        let parsed = try Experiment(try JSON.parse(Array(text.utf8)), fallbackId: "x")
        #expect(parsed.steps[0].say == "a" && parsed.steps[0].then == "b" && parsed.steps[0].withNext)
        #expect(parsed.steps[1].then == "" && !parsed.steps[1].withNext)
    }
}
