import Foundation
import Logging

/// A swift-log handler writing one JSON object per line to standard error
/// (`--log-format json`): `ts`, `level`, `label`, `msg`, `source` and every
/// metadata key, for log shippers.
struct JSONLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    init(label: String, level: Logger.Level) {
        self.label = label
        self.logLevel = level
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
        let bytes = Array(line.utf8)
        bytes.withUnsafeBytes { buffer in
            guard let base = buffer.baseAddress else { return }
            var offset = 0
            while offset < buffer.count {
                let written = write(2, base + offset, buffer.count - offset)
                if written <= 0 { break }
                offset += written
            }
        }
    }

    static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = now.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
            parts.tm_hour, parts.tm_min, parts.tm_sec, Int(now.tv_nsec / 1_000_000))
    }

    static func quote(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
