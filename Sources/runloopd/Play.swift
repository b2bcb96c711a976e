import ArgumentParser
import Foundation
import LabPlayer
import Logging
import RunLoopServer

/// `runloopd play FILE|DIR`: plays experiments against a runloopd (its own
/// embedded one on a free loopback port unless `--url` names one), prints
/// every step with expected vs actual, and exits 1 on any difference, 2 when
/// the files are not experiments or no server answers.
struct Play: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "play",
        abstract: "Play experiment files against a runloopd; exit 1 when any step differs.",
        discussion: """
            Plays one experiment file, or every *.json in a folder (sorted), step by step. Without --url \
            an embedded runloopd on a free loopback port plays them. The format is in docs/experiments.md; \
            GET /api/journal exports a recorded session in it. A step's wait (a recorded pause) is \
            honoured up to --max-wait; a background step is sent and its answer checked when it comes. \
            Exit status: 0 every step passed, 1 some step differed, 2 a file is not an experiment or the \
            server cannot be reached.
            """)

    @Argument(help: "An experiment file or a folder of them.")
    var path: String

    @Option(help: "The runloopd to play against (http://host:port); default: an embedded one.")
    var url: String?

    @Option(help: "Bearer token for a runloopd started with --token.")
    var token = Setting("", env: "TOKEN")

    @Option(help: "Also write a JUnit XML report here.")
    var junit: String?

    @Flag(help: "Print only the steps whose outcome differs (expected vs actual), as a diff.")
    var diff = false

    @Flag(help: "Print only failures and the summary.")
    var quiet = false

    @Option(help: "The longest pause a step's wait may make, in seconds (0: play the steps back to back).")
    var maxWait: Double = 60

    @Flag(help: "Delete the threads the play created (POST /api/threads) once each experiment is over.")
    var cleanup = false

    @Option(
        help:
            "Pause this many seconds before each step, as a learner pressing Step (steps joined by withNext play as one)."
    )
    var pace: Double = 0

    mutating func validate() throws { try token.resolve() }

    func run() throws {
        signal(SIGPIPE, SIG_IGN)
        let loaded: [(file: String, experiment: Experiment)]
        do {
            loaded = try ExperimentFiles.load(path)
        } catch {
            print("runloopd play: \(error.message)")
            throw ExitCode(2)
        }
        guard !loaded.isEmpty else {
            print("runloopd play: no *.json experiment in \(path)")
            throw ExitCode(2)
        }
        var embedded: RunLoopService?
        let client: LabClient
        if let url {
            guard let parsed = LabClient(url: url, token: token.value) else {
                print("runloopd play: --url must be http://host[:port]")
                throw ExitCode(2)
            }
            client = parsed
        } else {
            var config = ServiceConfiguration()
            config.http.host = "127.0.0.1"
            config.http.port = 0
            // It plays the files given; it serves no dashboard and reads no experiments folder.
            config.publicDirectory = "/nonexistent"
            config.experimentsDirectory = ""
            var logger = Logger(label: "runloopd.play")
            logger.logLevel = .error
            let service = RunLoopService(configuration: config, logger: logger)
            try service.start()
            embedded = service
            client = LabClient(host: "127.0.0.1", port: service.port)
        }
        defer { embedded?.stop() }
        guard maxWait.isFinite, (0...60).contains(maxWait) else {
            print("runloopd play: --max-wait must be seconds in 0...60")
            throw ExitCode(2)
        }
        guard pace.isFinite, (0...60).contains(pace) else {
            print("runloopd play: --pace must be seconds in 0...60")
            throw ExitCode(2)
        }
        // One look before the first step: no server there is one message, not one per step.
        let probe: LabClient.Response
        do throws(LabClient.Failure) {
            probe = try client.send("GET", "/api/version")
        } catch {
            print("runloopd play: cannot reach \(url ?? "the embedded runloopd"): \(error.description)")
            throw ExitCode(2)
        }
        if probe.status == 401 {
            print(
                "runloopd play: \(url ?? "the server") wants a token: give --token or RUNLOOPD_TOKEN"
                    + (token.value.isEmpty ? "" : " (the one given was refused)"))
            throw ExitCode(2)
        }

        var reports: [Player.Report] = []
        let player = Player(client: client, options: Player.Options(maxWait: maxWait, cleanup: cleanup, pace: pace))
        for (file, experiment) in loaded {
            if !diff && !quiet { print("▶ \(experiment.id): \(experiment.title)  (\(file))") }
            let report = player.play(experiment) { step in
                let ok = step.differences.isEmpty
                // Reported once, below.
                if step.unreachable != nil { return }
                // The diff names the ids as the file (the recording) has them, then
                // what they were here: `POST /api/threads/t2/run  [t2 → t13]`.
                let ids =
                    step.mapping.isEmpty
                    ? "" : "  [" + step.mapping.map { "\($0.name) → \($0.value)" }.joined(separator: ", ") + "]"
                if diff {
                    guard !ok else { return }
                    print("--- \(experiment.id) step \(step.number): \(step.written)\(ids)")
                    for d in step.differences {
                        print("-   \(d.what): \(d.expected)")
                        print("+   \(d.what): \(d.actual)")
                    }
                    return
                }
                if quiet && ok { return }
                let mark = ok ? "✓" : "✗"
                print("  \(mark) \(step.number). \(step.request) → \(step.status)  \(step.say)")
                for d in step.differences {
                    print("      \(d.what): expected \(d.expected), got \(d.actual)")
                }
            }
            if let why = report.unreachable {
                print(
                    "runloopd play: lost \(url ?? "the embedded runloopd") at \(experiment.id) step \(report.steps.count): \(why)"
                )
                throw ExitCode(2)
            }
            // Warnings on its threads: those it raises on purpose say so (and why).
            if !diff && !quiet {
                for w in report.warnings {
                    if let why = w.expected {
                        print("  · expected by this experiment: \(w.code) (\(w.severity)) on \(w.thread) — \(why)")
                    } else {
                        print("  ⚠ warning \(w.code) (\(w.severity)) on \(w.thread): \(w.message)")
                    }
                }
            }
            if cleanup && (!quiet || !report.cleanupFailures.isEmpty) {
                print(
                    "  cleanup: deleted \(report.cleanedUp.count) thread(s)"
                        + (report.cleanupFailures.isEmpty
                            ? "" : "; could not delete \(report.cleanupFailures.joined(separator: ", "))"))
            }
            reports.append(report)
            if !diff && (!quiet || !report.passed) {
                print(
                    "  \(report.passed ? "PASS" : "FAIL") \(experiment.id) (\(report.steps.count) steps, \(String(format: "%.2f", report.seconds)) s)"
                )
            }
        }
        if let junit {
            try Data(Player.junit(reports).utf8).write(to: URL(fileURLWithPath: junit))
        }
        let failed = reports.filter { !$0.passed }
        print(
            "\(reports.count - failed.count) of \(reports.count) experiments passed"
                + (failed.isEmpty ? "" : "; failed: \(failed.map(\.id).joined(separator: ", "))"))
        if !failed.isEmpty { throw ExitCode(1) }
    }
}
