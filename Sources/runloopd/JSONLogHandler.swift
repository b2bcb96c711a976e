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
        var line = "{\"ts\":\(Self.quote(Self.timestamp())),\"level\":\(Self.quote(event.level.rawValue))"
        line += ",\"label\":\(Self.quote(label)),\"msg\":\(Self.quote("\(event.message)"))"
        line += ",\"source\":\(Self.quote(event.source))"
        for key in fields.keys.sorted() where !["ts", "level", "label", "msg", "source"].contains(key) {
            line += ",\(Self.quote(key)):\(Self.quote(fields[key] ?? ""))"
        }
        line += "}\n"
        sink.append(line)
    }

    static func timestamp() -> String { Timestamp.string(Date()) }

    static func quote(_ text: String) -> String { JSON.quoted(text) }
}
