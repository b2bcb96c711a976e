import Foundation
import Primitives

/// The text of a packed row's `more` column: the pairs before its last,
/// oldest first, each `seq,at,requestAt,dataBytes,requestBytes;` then the
/// perform's text and the request's (as kept: compacted when it was). `seq`
/// and the lengths (UTF-8 bytes, so any text round-trips) in decimal; the
/// times as the 16 hex digits of the `Double`'s bits, exact and written
/// without formatting a number (the writer packs tens of thousands of
/// pairs a second).
public enum Pack {
    public struct Pair: Sendable, Equatable {
        public var seq: Int64
        public var at: Double
        public var requestAt: Double
        public var data: String
        public var request: String
    }

    /// `more` for `pairs` (none: nil).
    public static func text(_ pairs: some Collection<Pair>) -> String? {
        guard !pairs.isEmpty else { return nil }
        var out: [UInt8] = []
        for pair in pairs {
            append(
                seq: pair.seq, at: pair.at, requestAt: pair.requestAt, data: pair.data, request: pair.request,
                to: &out)
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends one pair's text to `out`.
    public static func append(
        seq: Int64, at: Double, requestAt: Double, data: String, request: String, to out: inout [UInt8]
    ) {
        out.appendDecimal(Int(seq))
        out.append(UInt8(ascii: ","))
        hex(at.bitPattern, to: &out)
        out.append(UInt8(ascii: ","))
        hex(requestAt.bitPattern, to: &out)
        out.append(UInt8(ascii: ","))
        out.appendDecimal(data.utf8.count)
        out.append(UInt8(ascii: ","))
        out.appendDecimal(request.utf8.count)
        out.append(UInt8(ascii: ";"))
        out.append(contentsOf: data.utf8)
        out.append(contentsOf: request.utf8)
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    private static func hex(_ bits: UInt64, to out: inout [UInt8]) {
        var shift: UInt64 = 60
        while true {
            out.append(hexDigits[Int(truncatingIfNeeded: (bits >> shift) & 0xF)])
            if shift == 0 { break }
            shift -= 4
        }
    }

    /// The pairs of `more` (what cannot be read ends the list).
    public static func pairs(_ more: String) -> [Pair] {
        var pairs: [Pair] = []
        let bytes = Array(more.utf8)
        var i = 0
        /// The field up to the next `,` or `;` (consumed), in `radix`.
        func number(_ radix: UInt64) -> UInt64? {
            var value: UInt64 = 0
            var digits = 0
            while i < bytes.count, bytes[i] != UInt8(ascii: ","), bytes[i] != UInt8(ascii: ";") {
                let c = bytes[i]
                let digit: UInt64
                switch c {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt64(c - UInt8(ascii: "0"))
                case UInt8(ascii: "a")...UInt8(ascii: "f") where radix == 16: digit = UInt64(c - UInt8(ascii: "a") + 10)
                default: return nil
                }
                let (shifted, overflow) = value.multipliedReportingOverflow(by: radix)
                let (sum, carry) = shifted.addingReportingOverflow(digit)
                guard !overflow, !carry, digits < 20 else { return nil }
                value = sum
                digits += 1
                i += 1
            }
            guard i < bytes.count, digits > 0 else { return nil }
            i += 1
            return value
        }
        while i < bytes.count {
            guard let seq = number(10), seq <= UInt64(Int64.max), let at = number(16), let requestAt = number(16),
                let dataBytes = number(10).flatMap({ Int(exactly: $0) }),
                let requestBytes = number(10).flatMap({ Int(exactly: $0) }),
                dataBytes <= bytes.count - i, requestBytes <= bytes.count - i - dataBytes
            else { break }
            let data = String(decoding: bytes[i..<(i + dataBytes)], as: UTF8.self)
            i += dataBytes
            let request = String(decoding: bytes[i..<(i + requestBytes)], as: UTF8.self)
            i += requestBytes
            pairs.append(
                Pair(
                    seq: Int64(seq), at: Double(bitPattern: at), requestAt: Double(bitPattern: requestAt), data: data,
                    request: request))
        }
        return pairs
    }
}
