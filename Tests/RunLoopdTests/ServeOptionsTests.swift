import ArgumentParser
import Foundation
import RunLoopCore
import Testing

@testable import runloopd

@Suite("runloopd serve: options and variables are parsed once, bad ones stop the start")
struct ServeOptionsTests {
    @Test(
        "a value of each kind that cannot be is refused with exit 64, naming the flag or the variable",
        arguments: [
            (["--max-wait", "soon"], [:], "The value 'soon' is invalid for '--max-wait"),
            (["--retention=-5d"], [:], "The value '-5d' is invalid for '--retention"),
            (["--connection-timeout", "5 fortnights"], [:], "is invalid for '--connection-timeout"),
            (["--max-body=-1"], [:], "The value '-1' is invalid for '--max-body"),
            (["--retention-size=-1MB"], [:], "The value '-1MB' is invalid for '--retention-size"),
            (["--max-threads=-3"], [:], "The value '-3' is invalid for '--max-threads"),
            (["--stall-thresholds", "300,200"], [:], "The value '300,200' is invalid for '--stall-thresholds"),
            (["--stall-thresholds", "100,,500"], [:], "is invalid for '--stall-thresholds"),
            (["--stall-thresholds", "1,2,3,4"], [:], "is invalid for '--stall-thresholds"),
            (["--store", "mysql://db"], [:], "The value 'mysql://db' is invalid for '--store"),
            (["--log-level", "loud"], [:], "The value 'loud' is invalid for '--log-level"),
            (["--retention-scope", "everyone"], [:], "The value 'everyone' is invalid for '--retention-scope"),
            (["--busy-threshold", "1.5"], [:], "--busy-threshold must be in (0, 1]"),
            (["--http-threads", "65"], [:], "--http-threads must be 1...64"),
            (["--max-wait", "0"], [:], "--max-wait must be 0.001...1e8 seconds"),
            (["--turn-ring-size", "512", "--max-turn-ring-size", "300"], [:], "--max-turn-ring-size must be"),
            (["--max-name-length", "0"], [:], "--max-name-length must be 1...4096"),
            ([], ["RUNLOOPD_MAX_WAIT": "soon"], "The value 'soon' of RUNLOOPD_MAX_WAIT is invalid for '--max-wait'"),
            ([], ["RUNLOOPD_MAX_WAIT": "0"], "--max-wait must be 0.001...1e8 seconds (it is RUNLOOPD_MAX_WAIT=0)"),
            ([], ["RUNLOOPD_PORT": "seventy"], "The value 'seventy' of RUNLOOPD_PORT is invalid for '--port'"),
            ([], ["RUNLOOPD_PORT": "70000"], "The value '70000' of RUNLOOPD_PORT is invalid for '--port'"),
            ([], ["RUNLOOPD_RETENTION_SIZE": "-1"], "of RUNLOOPD_RETENTION_SIZE is invalid for '--retention-size'"),
            ([], ["RUNLOOPD_STALL_THRESHOLDS": "5,1"], "of RUNLOOPD_STALL_THRESHOLDS is invalid"),
            ([], ["RUNLOOPD_NO_STORE": "maybe"], "The value 'maybe' of RUNLOOPD_NO_STORE is invalid for '--no-store'"),
            ([], ["RUNLOOPD_TRACE": "sometimes"], "of RUNLOOPD_TRACE is invalid for '--trace'"),
            ([], ["RUNLOOPD_MAX_SOURCES": "0"], "--max-sources must be 1...1000000 (it is RUNLOOPD_MAX_SOURCES=0)"),
        ] as [([String], [String: String], String)])
    func refused(arguments: [String], environment: [String: String], says: String) throws {
        let refused = try #require(refusal(arguments, environment: environment))
        #expect(refused.exitCode == ExitCode.validationFailure.rawValue)
        #expect(refused.message.contains(says), "\(refused.message)")
    }

    @Test("every option with a variable: the variable gives the configuration the flag gives")
    func variableAndFlagAgree() throws {
        let settings = documentedSettings()
        #expect(settings.count >= 60, "\(settings.count) options with a variable in --help")
        // Two at once would contradict the rest: a token file beside a token, a
        // password file without a PostgreSQL store. They go in a second batch.
        let apart: [String: String] = ["--token-file": "/dev/null", "--store-password-file": "/dev/null"]
        let batches = [
            (["--no-store"], settings.filter { apart[$0.flag] == nil }.map { ($0, $0.sample) }),
            (
                ["--no-store", "--store", "postgres://u@127.0.0.1:1/db"],
                settings.compactMap { setting in apart[setting.flag].map { (setting, $0) } }
            ),
        ]
        #expect(batches.map(\.1.count).reduce(0, +) == settings.count)
        for (base, samples) in batches {
            let flags = base + samples.flatMap { [$0.0.flag, $0.1] }
            let variables = Dictionary(uniqueKeysWithValues: samples.map { ($0.0.variable, $0.1) })
            let byFlag = try parseServe(flags)
            let byVariable = try parseServe(base, environment: variables)
            #expect(fingerprint(byFlag) == fingerprint(byVariable), "\(variables)")
            #expect(fingerprint(byVariable) != fingerprint(try parseServe(base)))
        }
    }

    @Test(
        "the switches and lists: the variable gives what the flag gives",
        arguments: [
            (["--no-auth"], ["RUNLOOPD_NO_AUTH": "1"]),
            (["--read-only"], ["RUNLOOPD_READ_ONLY": "yes"]),
            (["--no-trace"], ["RUNLOOPD_TRACE": "0"]),
            (
                ["--allowed-host", "a.example", "--allowed-host", "b.example"],
                ["RUNLOOPD_ALLOWED_HOST": "a.example, b.example"]
            ),
            (
                ["--allowed-origin", "https://dash.example:8443"],
                ["RUNLOOPD_ALLOWED_ORIGIN": "https://dash.example:8443"]
            ),
        ] as [([String], [String: String])])
    func switchesAndLists(arguments: [String], environment: [String: String]) throws {
        let byFlag = try parseServe(["--no-store"] + arguments)
        let byVariable = try parseServe(["--no-store"], environment: environment)
        #expect(fingerprint(byFlag) == fingerprint(byVariable))
        #expect(fingerprint(byFlag) != fingerprint(try parseServe(["--no-store"])), "\(arguments) changed nothing")
        #expect(try parseServe([], environment: ["RUNLOOPD_NO_STORE": "on"]).history.options.enabled == false)
    }

    @Test("a flag wins over its variable")
    func flagWins() throws {
        let serve = try parseServe(
            ["--no-store", "--max-wait", "9", "--max-threads", "5"],
            environment: ["RUNLOOPD_MAX_WAIT": "7", "RUNLOOPD_MAX_THREADS": "6", "RUNLOOPD_MAX_TIMERS": "11"])
        let config = serve.serviceConfiguration(token: nil)
        #expect(config.api.maxWaitSeconds == 9)
        #expect(config.limits.maxWorkers == 5)
        #expect(config.limits.maxTimersPerWorker == 11)
    }

    @Test("every engine limit, every explainer bound and every HTTP bound is reachable from a flag")
    func everyLimitHasAFlag() throws {
        let limitFields = Set(fields(Limits()).keys)
        let diagnosticFields = Set(fields(DiagnosticsOptions()).keys)
        #expect(limitFields.count >= 17 && diagnosticFields.count >= 12)
        // Every numeric option at once, at two values: the fields that differ are reachable.
        let numeric = documentedSettings().compactMap { setting in
            setting.numericSamples.map { (setting.flag, $0) }
        }
        let one = try parseServe(["--no-store"] + numeric.flatMap { [$0.0, $0.1.0] })
        let other = try parseServe(["--no-store"] + numeric.flatMap { [$0.0, $0.1.1] })
        let (a, b) = (one.serviceConfiguration(token: nil), other.serviceConfiguration(token: nil))
        let http = (fields(a.http), fields(b.http))
        let limits = (fields(a.limits), fields(b.limits))
        let diagnostics = (fields(a.diagnostics), fields(b.diagnostics))
        let unreached =
            limitFields.filter { limits.0[$0] == limits.1[$0] }.map { "Limits." + $0 }
            + diagnosticFields.filter { diagnostics.0[$0] == diagnostics.1[$0] && $0 != "tracing" }.map {
                "DiagnosticsOptions." + $0
            }
            // The host is a name, not a bound; the shutdown grace lives inside the stop's fixed bound.
            + Set(http.0.keys).subtracting(["host", "shutdownGracePeriod"]).filter { http.0[$0] == http.1[$0] }.map {
                "HTTPServerConfiguration." + $0
            }
        #expect(unreached.isEmpty, "no flag sets \(unreached.sorted())")
        // tracing is the --trace/--no-trace switch.
        #expect(
            try parseServe(["--no-store", "--no-trace"]).serviceConfiguration(token: nil).diagnostics.tracing == false)
    }

    @Test("docs/setup.md's flag table lists every option of --help with its variable")
    func documented() throws {
        let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../docs/setup.md")
        let text = try String(contentsOf: docs, encoding: .utf8)
        for setting in documentedSettings() {
            #expect(text.contains("| `\(setting.flag)` | `\(setting.variable)` |"), "\(setting.flag)")
        }
    }

    @Test("--help shows every option's default and variable, grouped by concern")
    func help() {
        let help = RunLoopdCommand.helpMessage(for: Serve.self, columns: 100_000)
        for title in ["HTTP:", "ACCESS:", "LIMITS:", "EXPLAINER:", "HISTORY STORE:", "LOGGING:", "OPERATIONS:"] {
            #expect(help.contains("\n\(title)\n"), "\(title)")
        }
        #expect(help.contains("--max-wait <max-wait>") && help.contains("(default: 5m; env RUNLOOPD_MAX_WAIT)"))
        #expect(help.contains("(default: 100,250,500; env RUNLOOPD_STALL_THRESHOLDS)"))
        #expect(help.contains("(default: 7d; env RUNLOOPD_RETENTION)"))
    }
}
