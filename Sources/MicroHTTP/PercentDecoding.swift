/// Percent-decoding for URL paths and query arguments.
public enum PercentDecoding {
    /// Decodes `%HH` escapes (and `+` as a space when `plusIsSpace`).
    ///
    /// Returns `nil` for a malformed escape, or when `rejectNUL` is set and the
    /// result contains a NUL byte. Bytes that are not UTF-8 become U+FFFD.
    public static func decode(_ text: some StringProtocol, plusIsSpace: Bool = false, rejectNUL: Bool = false)
        -> String?
    {
        let utf8 = Array(text.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(utf8.count)
        var index = 0
        while index < utf8.count {
            let byte = utf8[index]
            if byte == UInt8(ascii: "%") {
                guard index + 2 < utf8.count, let high = hexValue(utf8[index + 1]), let low = hexValue(utf8[index + 2])
                else { return nil }
                out.append(high << 4 | low)
                index += 3
                continue
            }
            out.append(plusIsSpace && byte == UInt8(ascii: "+") ? UInt8(ascii: " ") : byte)
            index += 1
        }
        if rejectNUL && out.contains(0) { return nil }
        return String(decoding: out, as: UTF8.self)
    }

    /// Whether every `%` in `text` starts a valid `%HH` escape (what `decode`
    /// accepts), checked without allocating.
    public static func isWellFormed(_ text: Substring) -> Bool {
        var pending = 0
        for byte in text.utf8 {
            if pending > 0 {
                guard hexValue(byte) != nil else { return false }
                pending -= 1
            } else if byte == UInt8(ascii: "%") {
                pending = 2
            }
        }
        return pending == 0
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
