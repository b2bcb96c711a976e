import Foundation
import Primitives
import RunLoopCore

/// JSON text ↔ `Value`: the only place the server parses or writes JSON.
public enum JSON {
    /// Parses a JSON document. Throws a `bad_json` error for anything that is not
    /// JSON or that holds a number outside Double's finite range.
    public static func parse(_ bytes: [UInt8]) throws(RunLoopError) -> Value {
        do throws(JSONReader.Failure) {
            return try JSONReader.parse(bytes)
        } catch {
            throw RunLoopError(
                kind: .badValue, code: .badJSON, message: "the body is not valid JSON: \(error.description)",
                field: nil)
        }
    }

    /// Serializes a value compactly (keys sorted, so output is stable).
    public static func serialize(_ value: Value) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        write(value, into: &out)
        return out
    }

    /// `text` as a JSON string literal, quotes included.
    public static func quoted(_ text: String) -> String {
        var out: [UInt8] = []
        writeString(text, into: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Serializes a value to a String.
    public static func string(_ value: Value) -> String {
        String(decoding: serialize(value), as: UTF8.self)
    }

    /// Appends `value` serialized (as `serialize` writes it) to `out`.
    static func write(_ value: Value, into out: inout [UInt8]) {
        switch value {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .number(let d): writeNumber(d, into: &out)
        case .string(let s): writeString(s, into: &out)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (index, item) in items.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                write(item, into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            var first = true
            for (key, member) in members.sorted(by: { $0.key < $1.key }) {
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                writeString(key, into: &out)
                out.append(UInt8(ascii: ":"))
                write(member, into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// Numbers: integers without a fraction, others in Swift's shortest
    /// round-trip form; non-finite values (never produced) as null.
    static func format(_ d: Double) -> String {
        guard d.isFinite else { return "null" }
        if d.rounded() == d && abs(d) < 1e15 { return String(Int64(d)) }
        return "\(d)"
    }

    /// Appends `format(value)`: an integer's digits without a `String`.
    static func writeNumber(_ value: Double, into out: inout [UInt8]) {
        guard value.isFinite, value.rounded() == value, abs(value) < 1e15 else {
            out.append(contentsOf: format(value).utf8)
            return
        }
        var whole = Int64(value)
        if whole < 0 {
            out.append(UInt8(ascii: "-"))
            whole = -whole
        }
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var start = 20
            repeat {
                start -= 1
                digits[start] = UInt8(48 + whole % 10)
                whole /= 10
            } while whole > 0
            out.append(contentsOf: UnsafeBufferPointer(rebasing: digits[start..<20]))
        }
    }

    /// Appends a literal's bytes (one copy, not a walk of its UTF-8 view).
    @inline(__always)
    static func writeLiteral(_ literal: StaticString, into out: inout [UInt8]) {
        out.append(contentsOf: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// Appends `s` as a JSON string literal, quotes included (the history's
    /// rows are written with it too).
    static func writeString(_ s: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var text = s
        text.withUTF8 { bytes in
            // Copy runs of plain bytes at once; escape only what must be.
            var runStart = 0
            for index in 0..<bytes.count {
                let byte = bytes[index]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<index]))
                runStart = index + 1
                switch byte {
                case UInt8(ascii: "\""): out.append(contentsOf: "\\\"".utf8)
                case UInt8(ascii: "\\"): out.append(contentsOf: "\\\\".utf8)
                case 0x0A: out.append(contentsOf: "\\n".utf8)
                case 0x0D: out.append(contentsOf: "\\r".utf8)
                case 0x09: out.append(contentsOf: "\\t".utf8)
                default:
                    out.append(contentsOf: "\\u00".utf8)
                    out.append(hexDigits[Int(byte >> 4)])
                    out.append(hexDigits[Int(byte & 0x0F)])
                }
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<bytes.count]))
        }
        out.append(UInt8(ascii: "\""))
    }
}

/// ISO-8601 timestamps with milliseconds, UTC (`2026-11-22T01:02:03.456Z`).
public enum Timestamp {
    /// The date of an ISO 8601 internet date-time, with or without
    /// fractional seconds (`2026-11-25T13:12:49.806Z`, `2026-11-25T14:00:00Z`).
    public static func parse(_ text: String) -> Date? {
        let iso = ISO8601DateFormatter()
        iso.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = iso.date(from: text) { return date }
        iso.formatOptions = [.withInternetDateTime]
        return iso.date(from: text)
    }

    /// The timestamp of `date`.
    public static func string(_ date: Date) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(24)
        append(date, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends the timestamp of `date` (`2026-11-25T13:12:49.806Z`, UTC,
    /// milliseconds truncated) as bytes: the civil date computed from the day
    /// count (proleptic Gregorian), no `gmtime` and no string building.
    public static func append(_ date: Date, to out: inout [UInt8]) {
        let interval = date.timeIntervalSince1970
        let whole = interval.rounded(.down)
        let seconds = Int(whole)
        let millis = min(999, Int(((interval - whole) * 1000).rounded(.down)))
        var days = seconds / 86_400
        var secondOfDay = seconds % 86_400
        if secondOfDay < 0 {
            secondOfDay += 86_400
            days -= 1
        }
        // Days since 1970-01-01 to year, month, day (eras of 400 years from 0000-03-01).
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        // A year outside four digits (never a real event's) takes as many as it needs.
        let fourDigits = (0...9999).contains(year)
        if !fourDigits { out.appendDecimal(year, digits: 4) }
        // The 24 bytes written in place, then appended at once (a timestamp
        // is in every event's text: one per perform, one per request).
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 24) { b in
            func digits(_ value: Int, _ count: Int, at end: Int) {
                var value = value
                for i in stride(from: end - 1, through: end - count, by: -1) {
                    b[i] = UInt8(truncatingIfNeeded: 48 + value % 10)
                    value /= 10
                }
            }
            digits(year, 4, at: 4)
            b[4] = UInt8(ascii: "-")
            digits(month, 2, at: 7)
            b[7] = UInt8(ascii: "-")
            digits(day, 2, at: 10)
            b[10] = UInt8(ascii: "T")
            digits(secondOfDay / 3600, 2, at: 13)
            b[13] = UInt8(ascii: ":")
            digits(secondOfDay / 60 % 60, 2, at: 16)
            b[16] = UInt8(ascii: ":")
            digits(secondOfDay % 60, 2, at: 19)
            b[19] = UInt8(ascii: ".")
            digits(millis, 3, at: 23)
            b[23] = UInt8(ascii: "Z")
            out.append(contentsOf: UnsafeBufferPointer(rebasing: b[(fourDigits ? 0 : 4)...]))
        }
    }

    static func value(_ date: Date?) -> Value {
        date.map { .string(string($0)) } ?? .null
    }
}
