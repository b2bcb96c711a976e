import ArgumentParser
import Foundation
import Logging

/// The log's level and format.
struct LoggingOptions: ParsableArguments {
    @Option(help: "The least level logged.")
    var logLevel = Setting(Logger.Level.info, env: "LOG_LEVEL")

    @Option(
        help: ArgumentHelp(
            "Read the log level from this file (one level name) at start and on every SIGHUP; it wins over --log-level.",
            discussion:
                "For a level changed without a restart: edit the file (or the ConfigMap it is mounted from), then send SIGHUP. A file that cannot be read or names no level refuses the start, and on SIGHUP keeps the level with a warning."
        ))
    var logLevelFile = Setting("", env: "LOG_LEVEL_FILE")

    @Option(help: "text (human-readable) or json (one JSON object per line).")
    var logFormat = Setting(LogFormat.text, env: "LOG_FORMAT")

    mutating func validate() throws {
        try resolve(\.logLevel, \.logLevelFile, \.logFormat)
    }

    /// The level named in `--log-level-file` (read at start and on each SIGHUP).
    func fileLogLevel() throws(ValidationError) -> Logger.Level {
        let path = logLevelFile.value
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ValidationError("cannot read --log-level-file \(path)")
        }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard let level = Logger.Level(rawValue: text.lowercased()) else {
            throw ValidationError(
                "--log-level-file \(path) must hold one of trace, debug, info, notice, warning, error, critical")
        }
        return level
    }
}
