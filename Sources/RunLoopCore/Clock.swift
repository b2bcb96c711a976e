import Foundation

/// Monotonic time in seconds (CLOCK_MONOTONIC), for durations.
public enum Monotonic {
    /// Seconds on the monotonic clock (for measuring intervals only).
    public static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}

/// A bounded window of samples with percentiles computed on read.
struct SampleWindow: Sendable {
    private var samples: [Double] = []
    private var next = 0
    let capacity: Int
    private(set) var last: Double?
    private(set) var maximum: Double?

    init(capacity: Int) { self.capacity = max(1, capacity) }

    mutating func add(_ value: Double) {
        last = value
        maximum = Swift.max(maximum ?? value, value)
        if samples.count < capacity {
            samples.append(value)
        } else {
            samples[next] = value
            next = (next + 1) % capacity
        }
    }

    /// The nearest-rank percentile (0…1) of the window, or nil when empty.
    func percentile(_ p: Double) -> Double? {
        guard !samples.isEmpty else { return nil }
        let sorted = samples.sorted()
        let rank = Int((p * Double(sorted.count)).rounded(.up)) - 1
        return sorted[Swift.min(Swift.max(rank, 0), sorted.count - 1)]
    }
}
