import Foundation
import Primitives
import RunLoopCore
import RunLoopServer

/// Plays experiments against a runloopd: each step's request is sent with the
/// captured variables filled in, its answer compared with the expectation.
/// A step that differs is reported and the experiment goes on (later steps
/// may still tell something); the experiment fails.
public struct Player: Sendable {
    /// How an experiment is played.
    public struct Options: Sendable {
        /// The longest `wait` honoured, in seconds (0: none; steps back to back).
        public var maxWait: Double = 60
        /// Delete the threads the play created (`POST /api/threads`) once it is over.
        public var cleanup = false
        /// Seconds paused before each step, as a learner pressing Step would
        /// (0: none). Steps joined by `withNext` are played as one: no pause
        /// between them. An experiment that holds at any pace passes with any value.
        public var pace: Double = 0

        /// The defaults: waits honoured up to 60 s, nothing deleted, no pause.
        public init(maxWait: Double = 60, cleanup: Bool = false, pace: Double = 0) {
            self.maxWait = maxWait
            self.cleanup = cleanup
            self.pace = pace
        }
    }

    let client: LabClient
    let options: Options

    /// A player speaking through `client`.
    public init(client: LabClient, options: Options = Options()) {
        self.client = client
        self.options = options
    }

    /// A step sent in the background: its report and captures once answered.
    private final class Pending: Sendable {
        let number: Int
        let captures: Set<String>
        let done = DispatchSemaphore(value: 0)
        let result = Locked<(StepReport, [String: String])?>(nil)

        init(number: Int, captures: Set<String>) {
            self.number = number
            self.captures = captures
        }

        func join() -> (StepReport, [String: String]) {
            done.wait()
            done.signal()
            return result.withLock { $0 }!
        }
    }

    /// Plays one experiment; `onStep` sees each step once its answer is
    /// checked (a background step when it is joined: when a later step needs
    /// what it captures, or at the end).
    public func play(_ experiment: Experiment, onStep: (StepReport) -> Void = { _ in }) -> Report {
        var vars: [String: String] = [:]
        var reports: [StepReport] = []
        var pending: [Pending] = []
        var lastSent: Date?
        var unreachable: String?
        var created: [String] = []
        func finish(_ report: StepReport, _ captured: [String: String]) {
            vars.merge(captured) { _, new in new }
            if let why = report.unreachable { unreachable = unreachable ?? why }
            if report.status / 100 == 2,
                report.request == "POST /api/threads" || report.request.hasPrefix("POST /api/threads?"),
                let id = report.body.object?["id"]?.string
            {
                created.append(id)
            }
            onStep(report)
            reports.append(report)
        }
        func join(_ which: (Pending) -> Bool) {
            let ready = pending.filter(which)
            pending.removeAll(where: which)
            for item in ready.sorted(by: { $0.number < $1.number }) {
                let (report, captured) = item.join()
                finish(report, captured)
            }
        }
        for (index, step) in experiment.steps.enumerated() {
            // A step that uses what a background step captures waits for its answer.
            let used = Self.names(in: step)
            join { !$0.captures.isDisjoint(with: used) || $0.result.withLock { $0 != nil } }
            if unreachable != nil { break }
            // A learner's pause before pressing Step: never inside a group.
            if options.pace > 0, index == 0 || !experiment.steps[index - 1].withNext {
                Thread.sleep(forTimeInterval: options.pace)
            }
            if let wait = step.wait, let lastSent {
                let due = lastSent.addingTimeInterval(min(wait, options.maxWait))
                let left = due.timeIntervalSinceNow
                if left > 0 { Thread.sleep(forTimeInterval: left) }
            }
            lastSent = Date()
            if step.background {
                let item = Pending(number: index + 1, captures: Set(step.capture.map(\.name)))
                let (client, snapshot, number) = (client, vars, index + 1)
                let thread = Thread {
                    var local = snapshot
                    var report = Self.play(step, number: number, vars: &local, client: client)
                    report.background = true
                    let captured = local.filter { snapshot[$0.key] != $0.value }
                    item.result.withLock { $0 = (report, captured) }
                    item.done.signal()
                }
                thread.name = "runloopd-play-\(number)"
                thread.start()
                pending.append(item)
                // It was under way when the next request arrived: so it is here too
                // before the next step goes (a stop must find the run it stopped).
                Self.awaitUnderWay(step, path: ExperimentPaths.substitute(step.path, vars), item, client: client)
            } else {
                var local = vars
                let report = Self.play(step, number: index + 1, vars: &local, client: client)
                finish(report, local.filter { vars[$0.key] != $0.value })
            }
            if unreachable != nil { break }
        }
        join { _ in true }
        var report = Report(
            id: experiment.id, title: experiment.title, steps: reports.sorted { $0.number < $1.number },
            unreachable: unreachable)
        if unreachable == nil { report.warnings = warnings(on: Set(created), experiment) }
        if options.cleanup && unreachable == nil {
            for id in created.reversed() {
                let path = "/api/threads/\(id)"
                do throws(LabClient.Failure) {
                    let answer = try client.send("DELETE", path)
                    // 404: the session deleted it itself.
                    if answer.status / 100 == 2 {
                        report.cleanedUp.append(id)
                    } else if answer.status != 404 {
                        report.cleanupFailures.append("\(id): \(answer.status)")
                    }
                } catch {
                    report.cleanupFailures.append("\(id): \(error.description)")
                }
            }
        }
        return report
    }

    /// The warnings `GET /api/warnings` lists for `threads`, oldest first,
    /// each marked with why `experiment` raises it when it declares its code.
    func warnings(on threads: Set<String>, _ experiment: Experiment) -> [SeenWarning] {
        guard !threads.isEmpty, let answer = try? client.send("GET", "/api/warnings"), answer.status == 200,
            case .array(let items)? = answer.json.object?["warnings"]
        else { return [] }
        return items.compactMap { item in
            guard let w = item.object, let thread = w["thread"]?.string, threads.contains(thread),
                let code = w["code"]?.string
            else { return nil }
            return SeenWarning(
                code: code, severity: w["severity"]?.string ?? "", thread: thread,
                message: w["message"]?.string ?? "", expected: experiment.expectedReason(code))
        }
    }

    /// After sending a background `POST /api/threads/{id}/run`: waits until
    /// that thread is inside a run (`depth` >= 1) or the run has answered, at
    /// most 10 s, asking again a little later each time. Other background
    /// steps go on at once.
    private static func awaitUnderWay(_ step: Experiment.Step, path: String, _ item: Pending, client: LabClient) {
        let parts = path.split(separator: "?", maxSplits: 1)[0].split(separator: "/")
        guard step.method == "POST", parts.count == 4, parts[0] == "api", parts[1] == "threads", parts[3] == "run"
        else { return }
        let deadline = Date().addingTimeInterval(10)
        var pause = 0.005
        while Date() < deadline {
            if item.result.withLock({ $0 != nil }) { return }
            guard let answer = try? client.send("GET", "/api/threads/\(parts[2])"), answer.status == 200 else {
                return
            }
            if (answer.json.object?["depth"]?.number ?? 0) >= 1 { return }
            Thread.sleep(forTimeInterval: pause)
            pause = min(pause * 2, 0.05)
        }
    }

    /// How long a step expected to pass is asked again while it answers 429.
    static let limitRetrySeconds = 10.0

    /// Marks a step's `answer` difference that found no server (`LabClient.Failure.unreachable`).
    static let unreachableMark = "unreachable: "

    /// The `${name}`s a step uses (path, body, expectations).
    static func names(in step: Experiment.Step) -> Set<String> {
        var text = step.path
        if let body = step.body { text += JSON.string(body) }
        for (path, expected) in step.json { text += path + JSON.string(expected) }
        var names: Set<String> = []
        var rest = Substring(text)
        while let open = rest.range(of: "${") {
            guard let close = rest[open.upperBound...].firstIndex(of: "}") else { break }
            names.insert(String(rest[open.upperBound..<close]))
            rest = rest[rest.index(after: close)...]
        }
        return names
    }

    /// `text` with each `${name}` written as its name.
    static func written(_ text: String) -> String {
        var out = ""
        var rest = Substring(text)
        while let open = rest.range(of: "${") {
            guard let close = rest[open.upperBound...].firstIndex(of: "}") else { break }
            out += rest[..<open.lowerBound] + rest[open.upperBound..<close]
            rest = rest[rest.index(after: close)...]
        }
        return out + rest
    }

    private static func play(_ step: Experiment.Step, number: Int, vars: inout [String: String], client: LabClient)
        -> StepReport
    {
        let started = Date()
        let path = ExperimentPaths.substitute(step.path, vars)
        let body = step.body.map { ExperimentPaths.substitute($0, vars) }
        let request = "\(step.method) \(path)"
        let used = names(in: step)
        let mapping = used.sorted().compactMap { name in
            vars[name].flatMap { $0 == name ? nil : (name: name, value: $0) }
        }
        // Expected and actual values are shown with the recording's names: a
        // value that is exactly a variable's is written as that variable's name.
        let names = Dictionary(vars.map { (JSON.string(.string($0.value)), JSON.string(.string($0.key))) }) { a, _ in a
        }
        func recorded(_ differences: [Difference]) -> [Difference] {
            differences.map { d in
                Difference(what: d.what, expected: names[d.expected] ?? d.expected, actual: names[d.actual] ?? d.actual)
            }
        }
        func report(_ status: Int, _ differences: [Difference], _ body: Value, sent: String = request) -> StepReport {
            StepReport(
                number: number, say: step.say, request: sent, written: "\(step.method) \(written(step.path))",
                mapping: mapping, status: status, differences: recorded(differences),
                seconds: Date().timeIntervalSince(started), body: body)
        }
        // A captured value may have made the path another one: it is sent only if
        // it is still an API path (the file's own path was checked when read).
        if let problem = Experiment.apiPathProblem(path) {
            let refused = "not sent: \(Experiment.visible(path)) is not an API path: \(problem)"
            return report(
                0, [Difference(what: "request.path", expected: "an API path (/api/…)", actual: refused)], .null,
                sent: "\(step.method) \(Experiment.visible(path))")
        }
        let deadline = Date().addingTimeInterval(step.until ?? 0)
        // A limit the step met where it was expected to pass (429: a full task
        // queue on a slower machine) is asked again, as 429 asks, until this.
        let limitDeadline = Date().addingTimeInterval(limitRetrySeconds)
        var pause = 0.01
        while true {
            let response: LabClient.Response
            do throws(LabClient.Failure) {
                response = try client.send(step.method, path, body: body)
            } catch {
                let actual = (error.unreachable ? unreachableMark : "") + error.description
                return report(0, [Difference(what: "answer", expected: "an HTTP answer", actual: actual)], .null)
            }
            let differences = compare(step, response, vars: vars)
            if response.status == 429, let expected = step.status, expected != 429, Date() < limitDeadline {
                Thread.sleep(forTimeInterval: pause)
                pause = min(pause * 2, 0.25)
                continue
            }
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
                return report(response.status, differences + missing, response.json)
            }
            // A condition with a deadline (`until`): ask again, a little later each time.
            Thread.sleep(forTimeInterval: pause)
            pause = min(pause * 2, 0.1)
        }
    }

    private static func compare(_ step: Experiment.Step, _ response: LabClient.Response, vars: [String: String])
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
}
