import RunLoopCore

/// A strict RFC 8259 JSON reader producing `Value` directly.
///
/// Written because every POST body is parsed on the control loop and
/// Foundation's `JSONDecoder` (through `Decodable`) took 12 µs for a 55-byte
/// perform body — a third of the control loop's time per perform — where this
/// takes well under one. It accepts exactly the JSON grammar: no comments,
/// trailing commas, leading zeros, bare control characters, invalid escapes,
/// unpaired surrogates or invalid UTF-8; numbers must fit a finite Double;
/// nesting is limited. A repeated object key keeps its last value.
struct JSONReader {
    /// Deepest nesting of arrays and objects accepted.
    static let maxDepth = 512

    /// Why a document was refused, with the byte offset where it went wrong.
    struct Failure: Error {
        let message: String
        let offset: Int
        var description: String { "\(message) at byte \(offset)" }
    }

    private let bytes: [UInt8]
    private var index = 0
    private var depth = 0

    private init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// Parses one JSON document (surrounding whitespace allowed).
    static func parse(_ bytes: [UInt8]) throws(Failure) -> Value {
        var reader = JSONReader(bytes)
        reader.skipSpace()
        let value = try reader.readValue()
        reader.skipSpace()
        guard reader.index == bytes.count else { throw reader.fail("unexpected text after the document") }
        return value
    }

    // MARK: - Grammar

    private func fail(_ message: String) -> Failure {
        Failure(message: message, offset: index)
    }

    private mutating func skipSpace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    private mutating func readValue() throws(Failure) -> Value {
        guard index < bytes.count else { throw fail("unexpected end of the document") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try readObject()
        case UInt8(ascii: "["): return try readArray()
        case UInt8(ascii: "\""): return .string(try readString())
        case UInt8(ascii: "t"): return try readLiteral("true", .bool(true))
        case UInt8(ascii: "f"): return try readLiteral("false", .bool(false))
        case UInt8(ascii: "n"): return try readLiteral("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try readNumber())
        default: throw fail("unexpected character")
        }
    }

    private mutating func readLiteral(_ word: StaticString, _ value: Value) throws(Failure) -> Value {
        let count = word.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw fail("unexpected end of the document") }
        let expected = UnsafeBufferPointer(start: word.utf8Start, count: count)
        for offset in 0..<count where bytes[index + offset] != expected[offset] {
            throw fail("unexpected character")
        }
        index += count
        return value
    }

    private mutating func enter() throws(Failure) {
        depth += 1
        if depth > Self.maxDepth { throw fail("nesting deeper than \(Self.maxDepth) levels") }
    }

    private mutating func readArray() throws(Failure) -> Value {
        var items: [Value] = []
        if try openContainer(closer: UInt8(ascii: "]")) { return .array(items) }
        repeat {
            skipSpace()
            items.append(try readValue())
        } while try !endOfItem(closer: UInt8(ascii: "]"))
        return .array(items)
    }

    private mutating func readObject() throws(Failure) -> Value {
        var members: [String: Value] = [:]
        if try openContainer(closer: UInt8(ascii: "}")) { return .object(members) }
        members.reserveCapacity(8)  // one allocation for the usual small object, not one per growth
        repeat {
            skipSpace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
                throw fail("expected a member name in double quotes")
            }
            let key = try readString()
            skipSpace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw fail("expected ':'") }
            index += 1
            skipSpace()
            members[key] = try readValue()
        } while try !endOfItem(closer: UInt8(ascii: "}"))
        return .object(members)
    }

    /// Consumes the opening bracket; `true` (container closed again) when it
    /// is empty.
    private mutating func openContainer(closer: UInt8) throws(Failure) -> Bool {
        try enter()
        index += 1  // [ or {
        skipSpace()
        guard index < bytes.count && bytes[index] == closer else { return false }
        index += 1
        depth -= 1
        return true
    }

    /// After an item: `,` continues (`false`); `closer` ends the container (`true`).
    private mutating func endOfItem(closer: UInt8) throws(Failure) -> Bool {
        skipSpace()
        guard index < bytes.count else { throw fail("unexpected end of the document") }
        let byte = bytes[index]
        if byte == closer {
            index += 1
            depth -= 1
            return true
        }
        guard byte == UInt8(ascii: ",") else {
            throw fail("expected ',' or '\(Character(Unicode.Scalar(closer)))'")
        }
        index += 1
        return false
    }

    private mutating func readString() throws(Failure) -> String {
        index += 1  // opening quote
        let start = index
        // Fast path: no escapes.
        var ascii = true
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let text = try ascii ? Self.asciiText(bytes[start..<index]) : text(bytes[start..<index], at: start)
                index += 1
                return text
            }
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw fail("control character in a string (escape it)") }
            if byte >= 0x80 { ascii = false }
            index += 1
        }
        var out = Array(bytes[start..<index])
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                let text = try text(out[...], at: start)
                index += 1
                return text
            case UInt8(ascii: "\\"):
                try readEscape(into: &out)
            case 0..<0x20:
                throw fail("control character in a string (escape it)")
            default:
                out.append(byte)
                index += 1
            }
        }
        throw fail("unterminated string")
    }

    /// ASCII bytes as a string: valid UTF-8 by construction, so nothing is
    /// validated (`String(validating:)` is generic over its input and looks
    /// its type metadata up on every call: about 900 instructions a string).
    private static func asciiText(_ ascii: ArraySlice<UInt8>) -> String {
        ascii.withUnsafeBufferPointer { String(decoding: $0, as: UTF8.self) }
    }

    private func text(_ utf8: ArraySlice<UInt8>, at start: Int) throws(Failure) -> String {
        guard let text = String(validating: utf8, as: UTF8.self) else {
            throw Failure(message: "string is not valid UTF-8", offset: start)
        }
        return text
    }

    private mutating func readEscape(into out: inout [UInt8]) throws(Failure) {
        index += 1  // backslash
        guard index < bytes.count else { throw fail("unterminated string") }
        let byte = bytes[index]
        index += 1
        switch byte {
        case UInt8(ascii: "\""): out.append(0x22)
        case UInt8(ascii: "\\"): out.append(0x5C)
        case UInt8(ascii: "/"): out.append(0x2F)
        case UInt8(ascii: "b"): out.append(0x08)
        case UInt8(ascii: "f"): out.append(0x0C)
        case UInt8(ascii: "n"): out.append(0x0A)
        case UInt8(ascii: "r"): out.append(0x0D)
        case UInt8(ascii: "t"): out.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = try readHex4()
            if (0xD800...0xDBFF).contains(scalar) {
                guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
                else { throw fail("unpaired surrogate in \\u escape") }
                index += 2
                let low = try readHex4()
                guard (0xDC00...0xDFFF).contains(low) else { throw fail("unpaired surrogate in \\u escape") }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00...0xDFFF).contains(scalar) {
                throw fail("unpaired surrogate in \\u escape")
            }
            guard let unicode = Unicode.Scalar(scalar) else { throw fail("invalid \\u escape") }
            out.append(contentsOf: String(Character(unicode)).utf8)
        default:
            index -= 1
            throw fail("invalid escape in a string")
        }
    }

    private mutating func readHex4() throws(Failure) -> UInt32 {
        guard index + 4 <= bytes.count else { throw fail("unterminated \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw fail("invalid \\u escape")
            }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        return value
    }

    /// Moves past one number's text (RFC 8259's grammar); whether it is an
    /// integer (no fraction, no exponent).
    private mutating func scanNumber() throws(Failure) -> Bool {
        func isDigit(_ i: Int) -> Bool { i < bytes.count && (0x30...0x39).contains(bytes[i]) }
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard isDigit(index) else { throw fail("a number needs digits") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
            if isDigit(index) { throw fail("leading zero in a number") }
        } else {
            while isDigit(index) { index += 1 }
        }
        var integral = true
        if index < bytes.count && bytes[index] == UInt8(ascii: ".") {
            integral = false
            index += 1
            guard isDigit(index) else { throw fail("a fraction needs digits") }
            while isDigit(index) { index += 1 }
        }
        if index < bytes.count && (bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E")) {
            integral = false
            index += 1
            if index < bytes.count && (bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-")) {
                index += 1
            }
            guard isDigit(index) else { throw fail("an exponent needs digits") }
            while isDigit(index) { index += 1 }
        }
        return integral
    }

    private mutating func readNumber() throws(Failure) -> Double {
        let start = index
        let integral = try scanNumber()
        // Short integers directly; everything else through Swift's correctly
        // rounded parser.
        if integral && index - start <= 15 {
            var value: Int64 = 0
            var cursor = start
            let negative = bytes[cursor] == UInt8(ascii: "-")
            if negative { cursor += 1 }
            while cursor < index {
                value = value * 10 + Int64(bytes[cursor] - 0x30)
                cursor += 1
            }
            return negative ? (value == 0 ? -0.0 : -Double(value)) : Double(value)
        }
        let literal = String(decoding: bytes[start..<index], as: UTF8.self)
        guard let value = Double(literal), value.isFinite else {
            throw Failure(message: "number out of range", offset: start)
        }
        return value
    }
}
