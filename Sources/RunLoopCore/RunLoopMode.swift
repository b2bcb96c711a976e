import CoreFoundation
import Foundation

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

    /// The CF mode to pass to CF calls: the real constants for default and common.
    public var cfMode: CFRunLoopMode {
        switch name {
        case "default": return kCFRunLoopDefaultMode
        case "common": return kCFRunLoopCommonModes
        default: return CFStrings.make(name)
        }
    }

    static let cfDefaultName = "kCFRunLoopDefaultMode"
    static let cfCommonName = "kCFRunLoopCommonModes"
    static let cocoaDefaultName = "NSDefaultRunLoopMode"
    static let cocoaCommonName = "NSRunLoopCommonModes"

    /// Maps a mode CF reports (e.g. from `CFRunLoopCopyCurrentMode`) to its user name.
    public static func name(ofCF mode: CFRunLoopMode?) -> String? {
        guard let mode else { return nil }
        let raw = CFStrings.string(mode)
        if raw == cfDefaultName { return "default" }
        if raw == cfCommonName { return "common" }
        return raw
    }

    public var description: String { name }
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
