import CoreFoundation
@_exported import RunLoopModel

// The model's value types (Sources/RunLoopModel, which cannot call CF) as
// the engine meets CF: a run's result, a mode's CF string, an activity's bit.
// Re-exported: whoever imports RunLoopCore sees the model's types too.

extension ExitReason {
    /// Maps CF's result. Returns `nil` for a value CF never documented.
    public init?(_ result: CFRunLoopRunResult) {
        self.init(rawValue: result.rawValue)
    }
}

extension RunLoopMode {
    /// The CF mode to pass to CF calls: the real constants for default and common.
    public var cfMode: CFRunLoopMode {
        switch name {
        case "default": return kCFRunLoopDefaultMode
        case "common": return kCFRunLoopCommonModes
        default: return CFStrings.make(name)
        }
    }

    /// Maps a mode CF reports (e.g. from `CFRunLoopCopyCurrentMode`) to its user name.
    public static func name(ofCF mode: CFRunLoopMode?) -> String? {
        guard let mode else { return nil }
        let raw = CFStrings.string(mode)
        if raw == cfDefaultName { return "default" }
        if raw == cfCommonName { return "common" }
        return raw
    }
}

extension Activity {
    /// The CF bit.
    public var bit: UInt { UInt(Activities(self).rawValue) }

    /// The activity for a single CF bit.
    public init?(bit: UInt) {
        guard let match = Activity.allCases.first(where: { $0.bit == bit }) else { return nil }
        self = match
    }
}

/// Conversions between Swift strings and CF strings without Foundation bridging.
enum CFStrings {
    /// A new CFString holding `string`'s UTF-8.
    static func make(_ string: String) -> CFString {
        var bytes = Array(string.utf8)
        return CFStringCreateWithBytes(nil, &bytes, bytes.count, CFStringBuiltInEncodings.UTF8.rawValue, false)
    }

    /// The Swift string for a CF string.
    static func string(_ cf: CFString) -> String {
        let length = CFStringGetLength(cf)
        var units = [UniChar](repeating: 0, count: length)
        CFStringGetCharacters(cf, CFRange(location: 0, length: length), &units)
        return String(decoding: units, as: UTF16.self)
    }
}
