import Foundation
import RunLoopCore

/// Plays experiments against a runloopd: each step's request is sent with the
/// captured variables filled in, its answer compared with the expectation.
/// A step that differs is reported and the experiment goes on (later steps
/// may still tell something); the experiment fails.
public struct Player: Sendable {
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
        /// The answer's status (0: no answer).
        public var status: Int
        /// The differences (none: the step passed).
        public var differences: [Difference]
        /// Seconds it took (repeats included).
        public var seconds: Double
        /// The answer's body.
        public var body: Value
    }

    /// One played experiment.
    public struct Report: Sendable {
        /// The experiment's id and title.
        public var id: String
        /// The title.
        public var title: String
        /// Its steps.
        public var steps: [StepReport]
        /// Whether every step passed.
        public var passed: Bool { steps.allSatisfy { $0.differences.isEmpty } }
        /// Seconds in all.
        public var seconds: Double { steps.reduce(0) { $0 + $1.seconds } }
    }

    let client: LabClient

    /// A player speaking through `client`.
    public init(client: LabClient) { self.client = client }

    /// Plays one experiment; `onStep` sees each step as it is played.
    public func play(_ experiment: Experiment, onStep: (StepReport) -> Void = { _ in }) -> Report {
        var vars: [String: String] = [:]
        var reports: [StepReport] = []
        for (index, step) in experiment.steps.enumerated() {
            let report = play(step, number: index + 1, vars: &vars)
            onStep(report)
            reports.append(report)
        }
        return Report(id: experiment.id, title: experiment.title, steps: reports)
    }

    private func play(_ step: Experiment.Step, number: Int, vars: inout [String: String]) -> StepReport {
        let started = Date()
        let path = ExperimentPaths.substitute(step.path, vars)
        let body = step.body.map { ExperimentPaths.substitute($0, vars) }
        let request = "\(step.method) \(path)"
        // A captured value may have made the path another one: it is sent only if
        // it is still an API path (the file's own path was checked when read).
        if let problem = Experiment.apiPathProblem(path) {
            let refused = "not sent: \(Experiment.visible(path)) is not an API path: \(problem)"
            return StepReport(
                number: number, say: step.say, request: "\(step.method) \(Experiment.visible(path))", status: 0,
                differences: [Difference(what: "request.path", expected: "an API path (/api/…)", actual: refused)],
                seconds: Date().timeIntervalSince(started), body: .null)
        }
        let deadline = Date().addingTimeInterval(step.until ?? 0)
        var pause = 0.01
        while true {
            let response: LabClient.Response
            do throws(LabClient.Failure) {
                response = try client.send(step.method, path, body: body)
            } catch {
                return StepReport(
                    number: number, say: step.say, request: request, status: 0,
                    differences: [Difference(what: "answer", expected: "an HTTP answer", actual: error.description)],
                    seconds: Date().timeIntervalSince(started), body: .null)
            }
            let differences = compare(step, response, vars: vars)
            if differences.isEmpty || step.until == nil || Date() >= deadline {
                var missing: [Difference] = []
                if differences.isEmpty {
                    for (name, jsonPath) in step.capture {
                        let path = ExperimentPaths.substitute(jsonPath, vars)
                        if let value = ExperimentPaths.resolve(path, in: response.json), value != .null {
                            vars[name] = ExperimentPaths.text(value)
                        } else {
                            missing.append(Difference(what: "capture \(name)", expected: jsonPath, actual: "missing"))
                        }
                    }
                }
                return StepReport(
                    number: number, say: step.say, request: request, status: response.status,
                    differences: differences + missing, seconds: Date().timeIntervalSince(started),
                    body: response.json)
            }
            // A condition with a deadline (`until`): ask again, a little later each time.
            Thread.sleep(forTimeInterval: pause)
            pause = min(pause * 2, 0.1)
        }
    }

    private func compare(_ step: Experiment.Step, _ response: LabClient.Response, vars: [String: String])
        -> [Difference]
    {
        var differences: [Difference] = []
        if let status = step.status, status != response.status {
            differences.append(Difference(what: "status", expected: String(status), actual: String(response.status)))
        }
        for (rawPath, expected) in step.json {
            // Paths may hold ${var} too (a filter on a captured id: items[id=${t}]).
            let path = ExperimentPaths.substitute(rawPath, vars)
            let wanted = ExperimentPaths.substitute(expected, vars)
            let actual = ExperimentPaths.resolve(path, in: response.json)
            if !ExperimentPaths.matches(actual, wanted) {
                differences.append(
                    Difference(
                        what: path, expected: JSON.string(wanted), actual: actual.map(JSON.string) ?? "missing"))
            }
        }
        return differences
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

/// Reading experiment files: one file, or every `*.json` of a folder (sorted).
public enum ExperimentFiles {
    /// The experiments at `path` (a file or a folder), each with its file name.
    public static func load(_ path: String) throws(RunLoopError) -> [(file: String, experiment: Experiment)] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw .notFound("experiment file or folder", path)
        }
        var files = [path]
        if isDirectory.boolValue {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
            files = names.filter { $0.hasSuffix(".json") }.sorted().map {
                (path as NSString).appendingPathComponent($0)
            }
        }
        var result: [(String, Experiment)] = []
        for file in files {
            guard let data = FileManager.default.contents(atPath: file) else {
                throw .badValue("experiment", "\(file): cannot read it")
            }
            let id = ((file as NSString).lastPathComponent as NSString).deletingPathExtension
            do throws(RunLoopError) {
                result.append((file, try Experiment(JSON.parse(Array(data)), fallbackId: id)))
            } catch {
                throw .badValue("experiment", "\(file): \(error.message)")
            }
        }
        return result
    }
}
