/// A run-loop mode as users name it: `"default"`, `"common"`, or any custom name.
///
/// `"default"` maps to `kCFRunLoopDefaultMode` and `"common"` to the real
/// `kCFRunLoopCommonModes` constant (CF recognises it by pointer, so a copied
/// string would silently become an ordinary custom mode).
public struct RunLoopMode: Hashable, Sendable, CustomStringConvertible {
    /// The user-facing name.
    public let name: String

    /// `kCFRunLoopDefaultMode`.
    public static let `default` = RunLoopMode(uncheckedName: "default")
    /// The `kCFRunLoopCommonModes` set: only for adding items, never for running.
    public static let common = RunLoopMode(uncheckedName: "common")

    /// Longest accepted custom mode name.
    public static let maxNameLength = 64

    private init(uncheckedName: String) { self.name = uncheckedName }

    /// Validates a user-supplied name (1…64 printable ASCII characters).
    public init(_ name: String) throws(RunLoopError) {
        // CF's and Cocoa's names are aliases, as the articles write them
        // (`NSDefaultRunLoopMode` is `kCFRunLoopDefaultMode` on every platform).
        if name == "default" || name == RunLoopMode.cfDefaultName || name == RunLoopMode.cocoaDefaultName {
            self = .default
            return
        }
        if name == "common" || name == RunLoopMode.cfCommonName || name == RunLoopMode.cocoaCommonName {
            self = .common
            return
        }
        guard !name.isEmpty, name.utf8.count <= RunLoopMode.maxNameLength,
            name.unicodeScalars.allSatisfy({ $0.value >= 0x21 && $0.value < 0x7f })
        else {
            throw RunLoopError.badValue(
                "mode", "a mode is 1-\(RunLoopMode.maxNameLength) printable ASCII characters without spaces")
        }
        self.name = name
    }

    /// Whether this is the common-modes set.
    public var isCommon: Bool { self == .common }

    package static let cfDefaultName = "kCFRunLoopDefaultMode"
    package static let cfCommonName = "kCFRunLoopCommonModes"
    static let cocoaDefaultName = "NSDefaultRunLoopMode"
    static let cocoaCommonName = "NSRunLoopCommonModes"

    /// For a custom mode whose name is close to one of CF's or Cocoa's
    /// (`kCFRunLoopDefault`, `NSDefaultRunloopMode`, `defualt`, `Common`):
    /// the known mode it most likely meant (`default` or `common`), else nil.
    /// Custom modes stay legal: this only feeds hints.
    public var suggestion: String? {
        guard !isCommon && self != .default else { return nil }
        return Self.suggestion(for: name)
    }

    /// "did you mean default?" for a name close to a known mode, else nil.
    public var hint: String? {
        guard let suggestion else { return nil }
        let alias =
            suggestion == "default"
            ? "kCFRunLoopDefaultMode, NSDefaultRunLoopMode" : "kCFRunLoopCommonModes, NSRunLoopCommonModes"
        return
            "mode \(name) is not a mode CF knows, so it is a new custom mode of its own; did you mean \(suggestion) (\(alias))?"
    }

    /// The known mode a name is close to: the same word in another case, or
    /// after taking off CF's and Cocoa's decorations (`kCFRunLoop`, `NS`,
    /// `RunLoop`, `Mode(s)`, `UI`), or within two edits of one.
    static func suggestion(for raw: String) -> String? {
        let lower = raw.lowercased()
        for (known, names) in [
            ("default", ["default", cfDefaultName, cocoaDefaultName]),
            ("common", ["common", cfCommonName, cocoaCommonName]),
        ] {
            for name in names {
                let target = name.lowercased()
                if lower == target { return known }
                if target.count > 6 && editDistance(lower, target, limit: 2) <= 2 { return known }
            }
        }
        var core = Substring(lower)
        for prefix in ["kcfrunloop", "kcf", "nsrunloop", "ns", "cfrunloop", "runloop"] where core.hasPrefix(prefix) {
            core = core.dropFirst(prefix.count)
            break
        }
        for suffix in ["modes", "mode"] where core.hasSuffix(suffix) {
            core = core.dropLast(suffix.count)
            break
        }
        if core.hasSuffix("runloop") { core = core.dropLast("runloop".count) }
        core = core.drop { $0 == "_" || $0 == "-" || $0 == "." }
        while let last = core.last, last == "_" || last == "-" || last == "." { core = core.dropLast() }
        for known in ["default", "common"] where editDistance(String(core), known, limit: 2) <= 2 {
            // Two edits on a word this short is a different word unless the
            // name was decorated or a letter pair swapped; one always counts.
            let distance = editDistance(String(core), known, limit: 2)
            if distance <= 1 || core.count == known.count || core != Substring(lower) { return known }
        }
        return nil
    }

    /// Optimal string alignment distance (Levenshtein plus adjacent
    /// transpositions), stopped early past `limit`.
    static func editDistance(_ a: String, _ b: String, limit: Int) -> Int {
        let x = Array(a.utf8)
        let y = Array(b.utf8)
        if abs(x.count - y.count) > limit { return limit + 1 }
        if x.isEmpty || y.isEmpty { return max(x.count, y.count) }
        var previous2 = [Int](repeating: 0, count: y.count + 1)
        var previous = Array(0...y.count)
        var current = [Int](repeating: 0, count: y.count + 1)
        for i in 1...x.count {
            current[0] = i
            var rowMin = current[0]
            for j in 1...y.count {
                let cost = x[i - 1] == y[j - 1] ? 0 : 1
                var value = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
                if i > 1 && j > 1 && x[i - 1] == y[j - 2] && x[i - 2] == y[j - 1] {
                    value = min(value, previous2[j - 2] + 1)
                }
                current[j] = value
                rowMin = min(rowMin, value)
            }
            if rowMin > limit { return limit + 1 }
            (previous2, previous, current) = (previous, current, previous2)
        }
        return previous[y.count]
    }

    public var description: String { name }
}
