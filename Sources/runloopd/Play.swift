import ArgumentParser
import Foundation
import Logging
import RunLoopServer

/// `runloopd play FILE|DIR`: plays experiments against a runloopd (its own
/// embedded one on a free loopback port unless `--url` names one), prints
/// every step with expected vs actual, and exits 1 on any difference.
struct Play: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "play",
        abstract: "Play experiment files against a runloopd; exit 1 when any step differs.",
        discussion: """
            Plays one experiment file, or every *.json in a folder (sorted), step by step. Without --url \
            an embedded runloopd on a free loopback port plays them. The format is in docs/experiments.md; \
            GET /api/journal exports a recorded session in it.
            """)

    @Argument(help: "An experiment file or a folder of them.")
    var path: String

    @Option(help: "The runloopd to play against (http://host:port); default: an embedded one.")
    var url: String?

    @Option(help: "Bearer token for a runloopd started with --token.")
    var token: String = ProcessInfo.processInfo.environment["RUNLOOPD_TOKEN"] ?? ""

    @Option(help: "Also write a JUnit XML report here.")
    var junit: String?

    @Flag(help: "Print only the steps whose outcome differs (expected vs actual), as a diff.")
    var diff = false

    @Flag(help: "Print only failures and the summary.")
    var quiet = false

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
            guard let parsed = LabClient(url: url, token: token) else {
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

        var reports: [Player.Report] = []
        let player = Player(client: client)
        for (file, experiment) in loaded {
            if !diff && !quiet { print("▶ \(experiment.id): \(experiment.title)  (\(file))") }
            let report = player.play(experiment) { step in
                let ok = step.differences.isEmpty
                if diff {
                    guard !ok else { return }
                    print("--- \(experiment.id) step \(step.number): \(step.request)")
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
