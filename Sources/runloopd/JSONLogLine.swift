import Foundation
import Logging
import RunLoopServer

/// The JSON log format (`--log-format json`): one object per line with
/// `ts`, `level`, `label`, `msg`, `source` and every metadata key, for log
/// shippers. `SinkLogHandler` writes it through `LogSink`.
enum JSONLogLine {
    /// One JSON line: `ts`, `level`, `label`, `msg`, `source`, then the fields in order.
    static func line(
        at date: Date, level: Logger.Level, label: String, message: String, source: String, fields: [(String, String)]
    ) -> String {
        var line = "{\"ts\":\(quote(Timestamp.string(date))),\"level\":\(quote(level.rawValue))"
        line += ",\"label\":\(quote(label)),\"msg\":\(quote(message))"
        line += ",\"source\":\(quote(source))"
        for (key, value) in fields where !["ts", "level", "label", "msg", "source"].contains(key) {
            line += ",\(quote(key)):\(quote(value))"
        }
        return line + "}\n"
    }

    /// An access entry in the same format.
    static func appendAccessLine(_ entry: AccessLogEntry, to out: inout [UInt8]) {
        out.append(
            contentsOf: line(
                at: entry.at, level: .info, label: "runloopd", message: entry.message, source: "RunLoopServer",
                fields: entry.metadata
            ).utf8)
    }

    static func quote(_ text: String) -> String { JSON.quoted(text) }
}
