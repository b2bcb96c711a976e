import MicroHTTP
import ArgumentParser
import Foundation
import Logging
import RunLoopCore
import RunLoopServer
import RunLoopStore

/// `runloopd`: serve real CoreFoundation run loops over HTTP (`serve`, the
/// default), or probe a running server (`healthcheck`).
struct RunLoopdCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "runloopd",
        abstract: "An HTTP service that exposes real CoreFoundation run loops.",
        version: RunLoopService.versionLine,
        subcommands: [Serve.self, Play.self, Healthcheck.self],
        defaultSubcommand: Serve.self
    )

    /// `main()`, except that a bad flag or value under `--log-format json`
    /// (or `RUNLOOPD_LOG_FORMAT=json`) is reported as one JSON log line at
    /// `error`, as everything else the process writes (exit status 64 as
    /// ArgumentParser's own). Help, `--version` and the exit codes `run`
    /// throws go the usual way.
    static func mainInChosenLogFormat(_ arguments: [String] = Array(CommandLine.arguments.dropFirst())) {
        let command: ParsableCommand
        do {
            command = try parseAsRoot(arguments)
        } catch {
            guard exitCode(for: error) != .success, Self.jsonLogs(arguments) else { exit(withError: error) }
            LogSink.standardError.append(
                JSONLogLine.line(
                    at: Date(), level: .error, label: "runloopd", message: "cannot start: \(message(for: error))",
                    source: "runloopd",
                    values: [
                        ("exitCode", .literal("\(exitCode(for: error).rawValue)")),
                        ("help", .string("runloopd serve --help lists every option")),
                    ]))
            LogSink.standardError.flush()
            Foundation.exit(exitCode(for: error).rawValue)
        }
        do {
            var command = command
            try command.run()
        } catch {
            exit(withError: error)
        }
    }

    /// Whether the arguments (or the environment) ask for JSON logs.
    static func jsonLogs(_ arguments: [String]) -> Bool {
        for (index, argument) in arguments.enumerated() {
            if argument == "--log-format=json" { return true }
            if argument == "--log-format", index + 1 < arguments.count { return arguments[index + 1] == "json" }
        }
        return Environment.current["LOG_FORMAT"] == "json"
    }
}
