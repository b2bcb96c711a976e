import Foundation
import RunLoopCore
import RunLoopServer

/// What a play reports: each step's differences, and JUnit XML for CI.
extension Player {
    /// One difference between expected and actual.
    public struct Difference: Sendable {
        /// What was compared (`status`, a JSON path, `capture x`).
        public var what: String
        /// Expected, as JSON text.
        public var expected: String
        /// Actual, as JSON text (`missing` when absent).
        public var actual: String
    }

    /// One played step.
    public struct StepReport: Sendable {
        /// 1-based.
        public var number: Int
        /// What the step shows.
        public var say: String
        /// The request as sent (variables filled in).
        public var request: String
        /// The request as written, each `${name}` shown as its name: for a
        /// recorded session, the ids the recording had (`t2`, not the replay's `t13`).
        public var written: String
        /// The variables the step used whose value differs from their name
        /// (`t2` → `t13`): how the recording's ids map to the replay's.
        public var mapping: [(name: String, value: String)]
        /// The answer's status (0: no answer).
        public var status: Int
        /// The differences (none: the step passed).
        public var differences: [Difference]
        /// Seconds it took (repeats included).
        public var seconds: Double
        /// The answer's body.
        public var body: Value
        /// Whether it was sent in the background.
        public var background = false
        /// Why no server answered, when no connection could be made.
        public var unreachable: String? {
            guard status == 0, let failure = differences.first(where: { $0.what == "answer" }),
                failure.actual.hasPrefix(Player.unreachableMark)
            else { return nil }
            return String(failure.actual.dropFirst(Player.unreachableMark.count))
        }
    }

    /// A warning raised on a thread the experiment created.
    public struct SeenWarning: Sendable {
        /// Its code, severity, thread and message, as `GET /api/warnings` has them.
        public var code: String
        /// `info`, `warning`, or a stall's `micro`, `hang`, `severe`.
        public var severity: String
        /// The thread.
        public var thread: String
        /// One sentence.
        public var message: String
        /// Why the experiment raises it on purpose (`expectedWarnings`); nil:
        /// not declared, a warning to look at.
        public var expected: String?
    }

    /// One played experiment.
    public struct Report: Sendable {
        /// The experiment's id and title.
        public var id: String
        /// The title.
        public var title: String
        /// Its steps.
        public var steps: [StepReport]
        /// Set when a step found no server to connect to: the experiment was
        /// abandoned there (the steps after it were not played).
        public var unreachable: String?
        /// `--cleanup`: the threads the play created and then deleted.
        public var cleanedUp: [String] = []
        /// `--cleanup`: deletions that failed (id: why).
        public var cleanupFailures: [String] = []
        /// The warnings raised on the threads the play created (read once
        /// its last step answered), each marked expected or not.
        public var warnings: [SeenWarning] = []
        /// Whether every step passed.
        public var passed: Bool { unreachable == nil && steps.allSatisfy { $0.differences.isEmpty } }
        /// Seconds in all.
        public var seconds: Double { steps.reduce(0) { $0 + $1.seconds } }
    }

    /// JUnit XML for CI dashboards: one test suite per experiment, one test case per step.
    public static func junit(_ reports: [Report]) -> String {
        func escape(_ s: String) -> String {
            s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
                .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
        }
        var xml = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"runloopd play\">\n"
        for report in reports {
            let failures = report.steps.filter { !$0.differences.isEmpty }.count
            xml +=
                "  <testsuite name=\"\(escape(report.id))\" tests=\"\(report.steps.count)\" failures=\"\(failures)\" time=\"\(String(format: "%.3f", report.seconds))\">\n"
            for step in report.steps {
                let name = "\(step.number) \(step.request)"
                xml +=
                    "    <testcase classname=\"\(escape(report.id))\" name=\"\(escape(name))\" time=\"\(String(format: "%.3f", step.seconds))\""
                if step.differences.isEmpty {
                    xml += "/>\n"
                } else {
                    let text = step.differences.map { "\($0.what): expected \($0.expected), got \($0.actual)" }
                        .joined(separator: "\n")
                    xml +=
                        ">\n      <failure message=\"\(escape(step.say))\">\(escape(text))</failure>\n    </testcase>\n"
                }
            }
            xml += "  </testsuite>\n"
        }
        return xml + "</testsuites>\n"
    }
}
