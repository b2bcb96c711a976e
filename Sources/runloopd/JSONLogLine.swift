import Foundation
import Logging
import RunLoopServer

/// The JSON log format (`--log-format json`): one object per line with
/// `ts`, `level`, `label`, `msg`, `source` and every metadata key, for log
/// shippers. `SinkLogHandler` writes it through `LogSink`. A value logged as
/// a number or a boolean (`.stringConvertible(200)`, `.stringConvertible(true)`)
/// is a JSON number or boolean; arrays and dictionaries are JSON arrays and
/// objects; anything else is a string.
enum JSONLogLine {
    /// One field's value as it is written.
    enum FieldValue: Equatable {
        /// A JSON string.
        case string(String)
        /// A JSON literal written as it is: a number, `true`, `false`, an array or an object.
        case literal(String)

        /// The value as the text format prints it.
        var text: String {
            switch self {
            case .string(let text), .literal(let text): text
            }
        }
    }

    /// One JSON line: `ts`, `level`, `label`, `msg`, `source`, then the fields in order (all strings).
    static func line(
        at date: Date, level: Logger.Level, label: String, message: String, source: String, fields: [(String, String)]
    ) -> String {
        line(
            at: date, level: level, label: label, message: message, source: source,
            values: fields.map { ($0, .string($1)) })
    }

    /// One JSON line: `ts`, `level`, `label`, `msg`, `source`, then the fields in order.
    static func line(
        at date: Date, level: Logger.Level, label: String, message: String, source: String,
        values: [(String, FieldValue)]
    ) -> String {
        var line = "{\"ts\":\(quote(Timestamp.string(date))),\"level\":\(quote(level.rawValue))"
        line += ",\"label\":\(quote(label)),\"msg\":\(quote(message))"
        line += ",\"source\":\(quote(source))"
        for (key, value) in values where !["ts", "level", "label", "msg", "source"].contains(key) {
            line += ",\(quote(key)):\(text(value))"
        }
        return line + "}\n"
    }

    /// A metadata value as JSON: numbers and booleans keep their type.
    static func value(_ metadata: Logger.MetadataValue) -> FieldValue {
        switch metadata {
        case .string(let text): return .string(text)
        case .stringConvertible(let convertible):
            switch convertible {
            case let flag as Bool: return .literal(flag ? "true" : "false")
            case let number as any BinaryInteger: return .literal("\(number)")
            case let number as Double: return number.isFinite ? .literal("\(number)") : .string("\(number)")
            case let number as Float: return number.isFinite ? .literal("\(number)") : .string("\(number)")
            default: return .string(convertible.description)
            }
        case .array(let items): return .literal("[" + items.map { text(value($0)) }.joined(separator: ",") + "]")
        case .dictionary(let entries):
            let members = entries.keys.sorted().map { "\(quote($0)):\(text(value(entries[$0]!)))" }
            return .literal("{" + members.joined(separator: ",") + "}")
        }
    }

    private static func text(_ value: FieldValue) -> String {
        switch value {
        case .string(let text): quote(text)
        case .literal(let literal): literal
        }
    }

    /// An access entry in the same format: `status` and `durationMs` are numbers.
    static func appendAccessLine(_ entry: AccessLogEntry, to out: inout [UInt8]) {
        out.append(
            contentsOf: line(
                at: entry.at, level: entry.level, label: "runloopd", message: entry.message, source: "RunLoopServer",
                values: [
                    ("durationMs", .literal("\(entry.milliseconds)")), ("remote", .string(entry.remote ?? "-")),
                    ("requestId", .string(entry.requestId)), ("route", .string(entry.route)),
                    ("status", .literal(String(entry.status))),
                ]
            ).utf8)
    }

    static func quote(_ text: String) -> String { JSON.quoted(text) }
}
