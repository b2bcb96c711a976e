/// The stored text's size cap (`--store-event-bytes`, docs/history.md
/// "Bounded in bytes"): an event whose JSON text is longer keeps its small
/// members as they are, and each of its largest members, until the text
/// fits, becomes a marker `{"cut":BYTES,"head":"…"}` (its length in bytes
/// and its first bytes as a string); the object then says so with
/// `"storedCut":{"bytes":ORIGINAL,"max":CAP}`. Text that is not an object,
/// or whose small members alone do not fit, becomes
/// `{"storedCut":{…},"head":"…"}`. Never dropped, always valid JSON, and
/// only what is kept changes: the answer and the live stream have it whole.
/// Pure functions: any thread (the recording thread calls it, before the lock).
enum EventCut {
    /// Bytes of a cut value kept as its `head`.
    static let headBytes = 64
    /// The least cap (`--store-event-bytes`): the markers of a cut must fit.
    static let smallest = 1024

    /// `text` cut to at most `max` bytes of UTF-8, or nil when it fits.
    static func cut(_ text: String, max: Int) -> String? {
        var text = text
        return text.withUTF8 { bytes -> String? in
            guard bytes.count > max else { return nil }
            var out: [UInt8] = []
            if let members = members(bytes), cut(bytes, members, max: max, into: &out) {
                return String(decoding: out, as: UTF8.self)
            }
            out.removeAll(keepingCapacity: true)
            JSON.writeLiteral(#"{"storedCut":"#, into: &out)
            stamp(bytes.count, max, into: &out)
            JSON.writeLiteral(#","head":"#, into: &out)
            head(bytes[...], into: &out)
            out.append(UInt8(ascii: "}"))
            return String(decoding: out, as: UTF8.self)
        }
    }

    private static func stamp(_ bytes: Int, _ max: Int, into out: inout [UInt8]) {
        JSON.writeLiteral(#"{"bytes":"#, into: &out)
        JSON.writeNumber(Double(bytes), into: &out)
        JSON.writeLiteral(#","max":"#, into: &out)
        JSON.writeNumber(Double(max), into: &out)
        out.append(UInt8(ascii: "}"))
    }

    /// The first `headBytes` of `value` (cut back to a whole character), as a JSON string.
    private static func head(_ value: Slice<UnsafeBufferPointer<UInt8>>, into out: inout [UInt8]) {
        var end = Swift.min(value.endIndex, value.startIndex + headBytes)
        // Never inside a character: back to the start of the one `end` cuts.
        while end > value.startIndex, end < value.endIndex, value[end] & 0xC0 == 0x80 { end -= 1 }
        JSON.writeString(String(decoding: value[value.startIndex..<end], as: UTF8.self), into: &out)
    }

    /// The object with its largest members replaced by markers, largest
    /// first, until it fits `max`; false when even that does not fit.
    private static func cut(
        _ bytes: UnsafeBufferPointer<UInt8>, _ members: [(key: Range<Int>, value: Range<Int>)], max: Int,
        into out: inout [UInt8]
    ) -> Bool {
        // What the text grows by: `,"storedCut":{"bytes":N,"max":M}`.
        let tail = 56
        // A marker's most: `{"cut":N,"head":"…"}` with every head byte escaped as \u00XX.
        let marker = 32 + 6 * headBytes
        var total = bytes.count + tail
        var replaced = Set<Int>()
        for index in members.indices.sorted(by: { members[$0].value.count > members[$1].value.count }) {
            if total <= max { break }
            let length = members[index].value.count
            guard length > marker else { break }
            replaced.insert(index)
            total += marker - length
        }
        guard total <= max else { return false }
        out.reserveCapacity(total)
        out.append(UInt8(ascii: "{"))
        for (index, member) in members.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: bytes[member.key])
            out.append(UInt8(ascii: ":"))
            if replaced.contains(index) {
                JSON.writeLiteral(#"{"cut":"#, into: &out)
                JSON.writeNumber(Double(member.value.count), into: &out)
                JSON.writeLiteral(#","head":"#, into: &out)
                head(bytes[member.value], into: &out)
                out.append(UInt8(ascii: "}"))
            } else {
                out.append(contentsOf: bytes[member.value])
            }
        }
        if !members.isEmpty { out.append(UInt8(ascii: ",")) }
        JSON.writeLiteral(#""storedCut":"#, into: &out)
        stamp(bytes.count, max, into: &out)
        out.append(UInt8(ascii: "}"))
        return out.count <= max
    }

    /// The members of a JSON object (each key with its quotes, and its
    /// value), or nil when `bytes` is not one.
    static func members(_ bytes: UnsafeBufferPointer<UInt8>) -> [(key: Range<Int>, value: Range<Int>)]? {
        var i = 0
        func space() { while i < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[i]) { i += 1 } }
        space()
        guard i < bytes.count, bytes[i] == UInt8(ascii: "{") else { return nil }
        i += 1
        var members: [(key: Range<Int>, value: Range<Int>)] = []
        space()
        if i < bytes.count, bytes[i] == UInt8(ascii: "}") { return members }
        while i < bytes.count {
            space()
            let keyStart = i
            guard i < bytes.count, bytes[i] == UInt8(ascii: "\""), let keyEnd = skip(bytes, from: i) else { return nil }
            i = keyEnd
            space()
            guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { return nil }
            i += 1
            space()
            let valueStart = i
            guard let valueEnd = skip(bytes, from: i), valueEnd > valueStart else { return nil }
            i = valueEnd
            members.append((keyStart..<keyEnd, valueStart..<valueEnd))
            space()
            guard i < bytes.count else { return nil }
            if bytes[i] == UInt8(ascii: "}") {
                i += 1
                space()
                return i == bytes.count ? members : nil
            }
            guard bytes[i] == UInt8(ascii: ",") else { return nil }
            i += 1
        }
        return nil
    }

    /// The end of the JSON value at `start` (a string, an object, an array or
    /// a scalar), or nil when it does not end.
    private static func skip(_ bytes: UnsafeBufferPointer<UInt8>, from start: Int) -> Int? {
        var i = start
        var depth = 0
        while i < bytes.count {
            let c = bytes[i]
            switch c {
            case UInt8(ascii: "\""):
                i += 1
                while i < bytes.count, bytes[i] != UInt8(ascii: "\"") {
                    i += bytes[i] == UInt8(ascii: "\\") ? 2 : 1
                }
                guard i < bytes.count else { return nil }
                i += 1
                if depth == 0 { return i }
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                depth += 1
                i += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                if depth == 0 { return i > start ? i : nil }
                depth -= 1
                i += 1
                if depth == 0 { return i }
            case UInt8(ascii: ","), 0x20, 0x09, 0x0A, 0x0D:
                if depth == 0 { return i > start ? i : nil }
                i += 1
            default:
                i += 1
            }
        }
        return depth == 0 && i > start ? i : nil
    }
}
