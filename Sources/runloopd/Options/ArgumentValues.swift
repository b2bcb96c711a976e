import ArgumentParser
import Foundation
import Logging
import RunLoopServer
import RunLoopStore

// The kinds of value the options take, each refusing what it cannot be: a
// flag or a variable that does not parse stops the start (exit 64).

/// A duration: plain seconds (`0.5`) or with a unit (`500ms`, `30s`, `5m`,
/// `12h`, `7d`, `1w`); finite and not negative.
struct Seconds: ExpressibleByArgument, Comparable, Sendable {
    let seconds: Double

    init(_ seconds: Double) { self.seconds = seconds }

    init?(argument: String) {
        guard let seconds = parseDuration(argument) else { return nil }
        self.seconds = seconds
    }

    static func < (a: Seconds, b: Seconds) -> Bool { a.seconds < b.seconds }

    /// In the largest whole unit (`7d`, `5m`), else in seconds (`0.5s`).
    var defaultValueDescription: String {
        for (unit, size) in [("d", 86_400.0), ("h", 3600), ("m", 60)]
        where seconds >= size && seconds.truncatingRemainder(dividingBy: size) == 0 {
            return "\(Int(seconds / size))\(unit)"
        }
        return (seconds == seconds.rounded() ? "\(Int(seconds))" : "\(seconds)") + "s"
    }
}

/// A size in bytes: plain (`65536`) or with a unit (`512KB`, `256MB`,
/// `1GB`, `1.5GiB`; `k`, `m`, `g` are binary); not negative.
struct ByteSize: ExpressibleByArgument, Comparable, Sendable {
    let bytes: Int64

    init(_ bytes: Int64) { self.bytes = bytes }

    init?(argument: String) {
        guard let bytes = parseByteSize(argument) else { return nil }
        self.bytes = bytes
    }

    static func < (a: ByteSize, b: ByteSize) -> Bool { a.bytes < b.bytes }

    var defaultValueDescription: String {
        for (unit, size) in [("GB", Int64(1_000_000_000)), ("MB", 1_000_000)] where bytes >= size && bytes % size == 0 {
            return "\(bytes / size)\(unit)"
        }
        return "\(bytes)"
    }
}

/// A whole number, not negative.
struct Count: ExpressibleByArgument, Comparable, ExpressibleByIntegerLiteral, Sendable {
    let value: Int

    init(_ value: Int) { self.value = value }

    init(integerLiteral value: Int) { self.value = value }

    init?(argument: String) {
        guard let value = Int(argument.trimmingCharacters(in: .whitespaces)), value >= 0 else { return nil }
        self.value = value
    }

    static func < (a: Count, b: Count) -> Bool { a.value < b.value }

    var defaultValueDescription: String { "\(value)" }
}

/// A number (a share, a factor): finite.
struct Number: ExpressibleByArgument, Comparable, Sendable {
    let value: Double

    init(_ value: Double) { self.value = value }

    init?(argument: String) {
        guard let value = Double(argument.trimmingCharacters(in: .whitespaces)), value.isFinite else { return nil }
        self.value = value
    }

    static func < (a: Number, b: Number) -> Bool { a.value < b.value }

    var defaultValueDescription: String { "\(value)" }
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
