import Foundation

/// SplitMix64: a small seeded generator for randomized tests (a printed
/// seed replays the same sequence).
public struct SplitMix: RandomNumberGenerator {
    public var state: UInt64

    public init(_ seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// True with probability `p`.
    public mutating func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &self) < p }

    /// One of `items` (not empty).
    public mutating func pick<T>(_ items: [T]) -> T { items[Int.random(in: 0..<items.count, using: &self)] }
}

extension SplitMix {
    /// A randomized test's seed: the environment's `variable` (a replay),
    /// or a fresh one each run. Printed either way, with how to replay it.
    public static func seed(_ variable: String, test: String) -> UInt64 {
        let given = ProcessInfo.processInfo.environment[variable].flatMap { UInt64($0) }
        let seed = given ?? UInt64.random(in: 1...UInt64.max)
        print("\(test): seed \(seed) (\(variable)=\(seed) replays it)")
        return seed
    }
}
