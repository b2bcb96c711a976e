import Primitives
import Synchronization

/// The Prometheus text format (version 0.0.4) written family by family: each
/// family gets its `# HELP` and `# TYPE` lines, then its samples. The caller
/// decides the order (`ServiceMetrics` writes a fixed one), so two scrapes
/// list the same families in the same order.
struct Exposition {
    /// A family's `# TYPE`.
    enum Kind: String {
        case counter, gauge, histogram
    }

    private(set) var bytes: [UInt8] = []

    init() { bytes.reserveCapacity(16 * 1024) }

    /// Starts a family: its `# HELP` and `# TYPE` lines.
    mutating func family(_ name: String, _ kind: Kind, _ help: String) {
        append("# HELP \(name) ")
        for byte in help.utf8 {
            switch byte {
            case UInt8(ascii: "\\"): append("\\\\")
            case UInt8(ascii: "\n"): append("\\n")
            default: bytes.append(byte)
            }
        }
        append("\n# TYPE \(name) \(kind.rawValue)\n")
    }

    /// A family of one unlabelled sample: its `# HELP` and `# TYPE` lines, then `name value`.
    mutating func single(_ name: String, _ kind: Kind, _ help: String, _ value: Double) {
        family(name, kind, help)
        sample(name, [], value)
    }

    /// One sample line: `name{labels} value`.
    mutating func sample(_ name: String, _ labels: [(String, String)] = [], _ value: Double) {
        append(name)
        if !labels.isEmpty {
            bytes.append(UInt8(ascii: "{"))
            for (index, (key, text)) in labels.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                append(key)
                append("=\"")
                for byte in text.utf8 {
                    switch byte {
                    case UInt8(ascii: "\\"): append("\\\\")
                    case UInt8(ascii: "\""): append("\\\"")
                    case UInt8(ascii: "\n"): append("\\n")
                    default: bytes.append(byte)
                    }
                }
                bytes.append(UInt8(ascii: "\""))
            }
            bytes.append(UInt8(ascii: "}"))
        }
        bytes.append(UInt8(ascii: " "))
        append(Self.format(value))
        bytes.append(UInt8(ascii: "\n"))
    }

    /// A histogram's `_bucket` lines (cumulative, `+Inf` last), `_sum` and `_count`.
    mutating func histogram(_ name: String, _ labels: [(String, String)] = [], _ snapshot: Histogram.Snapshot) {
        var cumulative = 0
        for (bound, count) in zip(snapshot.bounds, snapshot.counts) {
            cumulative += count
            sample(name + "_bucket", labels + [("le", Self.format(bound))], Double(cumulative))
        }
        sample(name + "_bucket", labels + [("le", "+Inf")], Double(snapshot.count))
        sample(name + "_sum", labels, snapshot.sum)
        sample(name + "_count", labels, Double(snapshot.count))
    }

    private mutating func append(_ text: String) { bytes.append(contentsOf: text.utf8) }

    /// Whole numbers without a fraction (`3`, not `3.0`); others as Swift
    /// prints a Double (shortest round-trip form); `+Inf`, `-Inf`, `NaN`.
    static func format(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return String(value)
    }
}

/// A monotonic count, bumped from any thread without a lock.
final class Counter: Sendable {
    private let count = Atomic<Int>(0)

    func increment(by amount: Int = 1) {
        count.wrappingAdd(amount, ordering: .relaxed)
    }

    var value: Int { count.load(ordering: .relaxed) }
}

/// A histogram of observations in seconds with fixed upper bounds.
/// Observations come from any thread; one short lock per observation.
final class Histogram: Sendable {
    struct Snapshot {
        let bounds: [Double]
        /// Per bucket (not cumulative), `bounds.count` of them; the overflow is `count - sum(counts)`.
        var counts: [Int]
        var sum = 0.0
        var count = 0

        /// An empty histogram over `bounds`.
        init(bounds: [Double]) {
            self.bounds = bounds
            counts = Array(repeating: 0, count: bounds.count)
        }

        /// Counts one observation (a negative or non-finite one as 0).
        mutating func add(_ seconds: Double) {
            let value = seconds.isFinite ? max(0, seconds) : 0
            if let index = bounds.firstIndex(where: { value <= $0 }) { counts[index] += 1 }
            sum += value
            count += 1
        }
    }

    private let state: Locked<Snapshot>

    init(bounds: [Double]) {
        state = Locked(Snapshot(bounds: bounds))
    }

    func observe(_ seconds: Double) {
        state.withLock { $0.add(seconds) }
    }

    var snapshot: Snapshot { state.withLock { $0 } }
}
