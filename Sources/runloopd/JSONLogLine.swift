import Foundation
import Logging
import RunLoopServer

/// A swift-log handler writing one JSON object per line to standard error
/// (`--log-format json`) through `LogSink`: `ts`, `level`, `label`, `msg`,
/// `source` and every metadata key, for log shippers.
struct JSONLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?
    let sink: LogSink

    init(label: String, level: Logger.Level, sink: LogSink = .standardError) {
        self.label = label
        self.logLevel = level
        self.sink = sink
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var fields: [String: String] = [:]
        for (key, value) in metadata { fields[key] = "\(value)" }
        if let provided = metadataProvider?.get() { for (key, value) in provided { fields[key] = "\(value)" } }
        if let extra = event.metadata { for (key, value) in extra { fields[key] = "\(value)" } }
        sink.append(
            Self.line(
                at: Date(), level: event.level, label: label, message: "\(event.message)", source: event.source,
                fields: fields.keys.sorted().map { ($0, fields[$0] ?? "") }))
    }

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
    static func appendAccessLine(_ entry: AccessLogEntry, to out: inout [UInt8], clock: inout ClockCache) {
        out.append(
            contentsOf: line(
                at: entry.at, level: .info, label: "runloopd", message: entry.message, source: "RunLoopServer",
                fields: entry.metadata
            ).utf8)
    }

    static func timestamp() -> String { Timestamp.string(Date()) }

    static func quote(_ text: String) -> String { JSON.quoted(text) }
}
