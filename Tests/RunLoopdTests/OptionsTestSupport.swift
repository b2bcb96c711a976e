import ArgumentParser
import Foundation

@testable import runloopd

/// Parses `runloopd serve` as `main` does, with `environment` as the only
/// variables (the test process's own `RUNLOOPD_*` are never read).
func parseServe(_ arguments: [String], environment: [String: String] = [:]) throws -> Serve {
    try Environment.$current.withValue(Environment(environment)) { try Serve.parse(arguments) }
}

/// What a refused parse says and its exit code; nil when it parses.
func refusal(_ arguments: [String], environment: [String: String] = [:]) -> (message: String, exitCode: Int32)? {
    do {
        _ = try parseServe(arguments, environment: environment)
        return nil
    } catch {
        return (Serve.message(for: error), Serve.exitCode(for: error).rawValue)
    }
}

/// Everything a parse resolves to, as text: the service's configuration and
/// the settings the command keeps for itself (the token file, the log, the
/// setup, the port file, the drain).
func fingerprint(_ serve: Serve) -> String {
    let config = serve.serviceConfiguration(token: serve.access.token.value.isEmpty ? nil : serve.access.token.value)
    let own = [
        serve.access.tokenFile.value, "\(serve.access.noAuth)", serve.logging.logLevel.value.rawValue,
        serve.logging.logLevelFile.value, serve.logging.logFormat.value.rawValue, serve.operations.setup.value,
        serve.operations.portFile.value, "\(serve.operations.drainDelay.seconds)",
    ]
    return String(reflecting: config) + " | " + own.joined(separator: " | ")
}

/// An option `runloopd serve --help` shows with a variable of its own, as
/// the help text users see says it.
struct DocumentedSetting {
    let flag: String
    let variable: String
    /// The default shown (`5m`, `100,250,500`, `none`, …).
    let shownDefault: String
    /// The values listed for a choice (empty otherwise).
    let choices: [String]

    /// Two values other than the default that a value of its kind takes, or
    /// nil when it is not a number, duration, size or list of them.
    var numericSamples: (String, String)? {
        if let whole = Int(shownDefault) { return ("\(whole + 1)", "\(whole + 2)") }
        if shownDefault.contains(",") { return ("50,60,70", "51,61,71") }
        if shownDefault.firstMatch(of: /^[0-9.]+(s|m|h|d)$/) != nil { return ("3", "5") }
        if shownDefault.hasSuffix("MB") || shownDefault.hasSuffix("GB") { return ("3MB", "5MB") }
        if Double(shownDefault) != nil { return ("0.5", "0.6") }
        return nil
    }

    /// A value other than the default that the option takes.
    var sample: String {
        if let other = choices.first(where: { $0 != shownDefault }) { return other }
        if let (first, _) = numericSamples { return first }
        return shownDefault.hasPrefix("sqlite") ? "sqlite:/tmp/runloopd-options.sqlite" : "sample-0123456789abcdef"
    }
}

/// Every option `runloopd serve --help` shows with a variable of its own.
func documentedSettings() -> [DocumentedSetting] {
    let help = RunLoopdCommand.helpMessage(for: Serve.self, columns: 100_000)
    // One entry per option: its line and the indented lines that continue it.
    var entries: [String] = []
    for line in help.split(separator: "\n") {
        if line.hasPrefix("  --") {
            entries.append(String(line))
        } else if line.hasPrefix("   "), !entries.isEmpty {
            entries[entries.count - 1] += " " + line.trimmingCharacters(in: .whitespaces)
        }
    }
    return entries.compactMap { entry in
        guard let flag = entry.firstMatch(of: #/^  (--[a-z0-9-]+)\s/#),
            let shown = entry.firstMatch(of: /default: ([^;]*); env (RUNLOOPD_[A-Z0-9_]+)\)/)
        else { return nil }
        let choices = entry.firstMatch(of: /values: ([^;]*);/).map {
            $0.1.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        }
        return DocumentedSetting(
            flag: String(flag.1), variable: String(shown.2), shownDefault: String(shown.1), choices: choices ?? [])
    }
}

/// Names and values of a struct's stored properties (`Limits`, `DiagnosticsOptions`).
func fields(_ value: Any) -> [String: String] {
    Dictionary(
        uniqueKeysWithValues: Mirror(reflecting: value).children.compactMap { child in
            child.label.map { ($0, String(reflecting: child.value)) }
        })
}
