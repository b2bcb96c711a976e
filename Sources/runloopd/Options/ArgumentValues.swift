import ArgumentParser
import Foundation
import Logging
import RunLoopServer
import RunLoopStore

// The kinds of value the options take, each refusing what it cannot be: a
// flag or a variable that does not parse stops the start (exit 64).

/// A value read from its text by `parse`, kept and ordered as `raw`.
protocol ParsedValue: ExpressibleByArgument, Comparable, Sendable {
    associatedtype Raw: Comparable & Sendable
    var raw: Raw { get }
    init(raw: Raw)
    /// The value `text` names, or nil when it names none.
    static func parse(_ text: String) -> Raw?
}

extension ParsedValue {
    init(_ raw: Raw) { self.init(raw: raw) }

    init?(argument: String) {
        guard let raw = Self.parse(argument) else { return nil }
        self.init(raw: raw)
    }

    static func < (a: Self, b: Self) -> Bool { a.raw < b.raw }
}

/// A duration: plain seconds (`0.5`) or with a unit (`500ms`, `30s`, `5m`,
/// `12h`, `7d`, `1w`); finite and not negative.
struct Seconds: ParsedValue {
    let raw: Double
    static func parse(_ text: String) -> Double? { parseDuration(text) }

    /// In the largest whole unit (`7d`, `5m`), else in seconds (`0.5s`).
    var defaultValueDescription: String {
        inWholeUnits(raw, [("d", 86_400), ("h", 3600), ("m", 60)])
            ?? (raw == raw.rounded() ? "\(Int(raw))" : "\(raw)") + "s"
    }
}

/// A size in bytes: plain (`65536`) or with a unit (`512KB`, `256MB`,
/// `1GB`, `1.5GiB`; `k`, `m`, `g` are binary); not negative.
struct ByteSize: ParsedValue {
    let raw: Int64
    static func parse(_ text: String) -> Int64? { parseByteSize(text) }

    var defaultValueDescription: String {
        inWholeUnits(Double(raw), [("GB", 1_000_000_000), ("MB", 1_000_000)]) ?? "\(raw)"
    }
}

/// `value` in the largest of `units` that measures it whole (`7d`, `256MB`);
/// nil when none does.
func inWholeUnits(_ value: Double, _ units: [(name: String, size: Double)]) -> String? {
    units.first { value >= $0.size && value.truncatingRemainder(dividingBy: $0.size) == 0 }.map {
        "\(Int(value / $0.size))\($0.name)"
    }
}

/// A whole number, not negative.
struct Count: ParsedValue {
    let raw: Int
    static func parse(_ text: String) -> Int? {
        Int(text.trimmingCharacters(in: .whitespaces)).flatMap { $0 >= 0 ? $0 : nil }
    }
    var defaultValueDescription: String { "\(raw)" }
}

extension Count: ExpressibleByIntegerLiteral {
    init(integerLiteral raw: Int) { self.init(raw: raw) }
}

/// A number (a share, a factor): finite.
struct Number: ParsedValue {
    let raw: Double
    static func parse(_ text: String) -> Double? {
        Double(text.trimmingCharacters(in: .whitespaces)).flatMap { $0.isFinite ? $0 : nil }
    }
    var defaultValueDescription: String { "\(raw)" }
}

/// Stall thresholds: one to three increasing positive millisecond values
/// (`micro-hang,hang,severe`, e.g. `100,250,500`), kept in seconds.
struct StallThresholds: ExpressibleByArgument, Sendable {
    let seconds: [Double]

    init(_ seconds: [Double]) { self.seconds = seconds }

    init?(argument: String) {
        let parts = argument.split(separator: ",", omittingEmptySubsequences: false).map {
            Double($0.trimmingCharacters(in: .whitespaces))
        }
        let values = parts.compactMap { $0 }
        guard (1...3).contains(parts.count), values.count == parts.count,
            values.allSatisfy({ $0 > 0 && $0.isFinite }), zip(values, values.dropFirst()).allSatisfy({ $0 < $1 })
        else { return nil }
        seconds = values.map { $0 / 1000 }
    }

    var defaultValueDescription: String {
        seconds.map { ms in
            let value = ms * 1000
            return value == value.rounded() ? "\(Int(value))" : "\(value)"
        }.joined(separator: ",")
    }
}

/// Where history is kept: `sqlite` (in the data folder), `sqlite:PATH`, or a
/// `postgres://` (or `postgresql://`) URL.
struct StoreURL: ExpressibleByArgument, Sendable {
    let text: String

    /// `history.sqlite` in the data folder.
    static let sqlite = StoreURL(text: "sqlite")

    private init(text: String) { self.text = text }

    init?(argument: String) {
        let text = argument.trimmingCharacters(in: .whitespaces)
        let postgres = ["postgres://", "postgresql://"].contains { text.hasPrefix($0) && text.count > $0.count }
        guard text == "sqlite" || (text.hasPrefix("sqlite:") && text.count > "sqlite:".count) || postgres else {
            return nil
        }
        self.text = text
    }

    var defaultValueDescription: String { text }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}

extension RetentionScope: ExpressibleByArgument {}

extension LogFormat: ExpressibleByArgument {}
