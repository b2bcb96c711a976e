import Primitives
import CMicroHTTPD

/// The framing rules of RFC 9112 that libmicrohttpd leaves to its user,
/// checked on a request's header fields before its body is read:
/// - `Content-Length` together with `Transfer-Encoding` (§6.1: a request
///   smuggling vector; libmicrohttpd lets chunked win and keeps reading):
///   400 `ambiguous_framing`;
/// - `Content-Length` values that differ, repeated or in one list (§6.3):
///   400 `conflicting_content_length`;
/// - an HTTP/1.1 request without `Host`, or with more than one, or with a
///   `Host` holding a NUL or another control byte (§3.2): 400 `bad_host`.
///
/// Each is answered with `Connection: close`, so bytes after the head are
/// never read as another request. Pure logic over the fields as sent (each
/// value's bytes with its length, so a NUL inside a value is seen); the
/// HTTP layer feeds it from libmicrohttpd.
public struct RequestFraming: Sendable {
    /// What is wrong with a request's framing.
    public struct Refusal: Equatable, Sendable {
        /// The error code (`ambiguous_framing`, `conflicting_content_length`, `bad_host`).
        public let code: ErrorCode
        /// What is wrong, for the client.
        public let message: String
    }

    private var contentLengths: [[UInt8]] = []
    /// Whether the last field added was a `Host` (a NUL found after its value marks it).
    private var lastWasHost = false
    private var transferEncoding = false
    private var hosts: [[UInt8]] = []

    public init() {}

    /// Adds one header field (`name` and `value` as sent).
    public mutating func add(name: [UInt8], value: [UInt8]) {
        name.withUnsafeBytes { name in value.withUnsafeBytes { add(name: name, value: $0) } }
    }

    /// Adds one header field, read in place: only the values kept (the
    /// `Content-Length` and `Host` fields) are copied.
    mutating func add(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {
        lastWasHost = false
        if Self.equalsIgnoringCase(name, "content-length") {
            contentLengths.append(Array(value))
        } else if Self.equalsIgnoringCase(name, "transfer-encoding") {
            transferEncoding = true
        } else if Self.equalsIgnoringCase(name, "host") {
            lastWasHost = true
            hosts.append(Array(value))
        }
    }

    /// The value last added had more bytes behind a NUL (seen by the HTTP
    /// layer, where values arrive cut at their first NUL).
    mutating func hiddenNULInLastValue() {
        if lastWasHost, !hosts.isEmpty { hosts[hosts.count - 1].append(0) }
    }

    /// The refusal for a request of `version` (`HTTP/1.1`, `HTTP/1.0`) with
    /// the fields added, or nil when its framing is sound.
    public func check(version: String) -> Refusal? { check(isHTTP11: version == "HTTP/1.1") }

    /// The value of the first `Content-Length` field as a length: `Int.max`
    /// for digits too many for an `Int`, 0 for anything else (libmicrohttpd
    /// itself refuses a malformed one). Nil without the field.
    var declaredLength: Int? {
        guard let value = contentLengths.first else { return nil }
        let digits = Self.trimmed(value[...])
        guard !digits.isEmpty, digits.allSatisfy({ (0x30...0x39).contains($0) }) else { return 0 }
        var length = 0
        for digit in digits {
            let (times, over) = length.multipliedReportingOverflow(by: 10)
            let (sum, carry) = times.addingReportingOverflow(Int(digit - 0x30))
            if over || carry { return Int.max }
            length = sum
        }
        return length
    }

    /// `check(version:)`, told only whether the request is HTTP/1.1.
    func check(isHTTP11: Bool) -> Refusal? {
        if transferEncoding && !contentLengths.isEmpty {
            return Refusal(
                code: .ambiguousFraming,
                message: "the request has both Content-Length and Transfer-Encoding (RFC 9112 §6.1)")
        }
        // Every member of every Content-Length value must be the same text.
        var first: ArraySlice<UInt8>?
        for value in contentLengths {
            for member in value.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false) {
                let length = Self.trimmed(member)
                if let first, !first.elementsEqual(length) {
                    return Refusal(
                        code: .conflictingContentLength,
                        message: "the request has Content-Length values that differ (RFC 9112 §6.3)")
                }
                first = first ?? length
            }
        }
        if hosts.count > 1 {
            return Refusal(code: .badHost, message: "the request has more than one Host field (RFC 9112 §3.2)")
        }
        // Blanks around a value are not part of it (RFC 9110 §5.5); libmicrohttpd keeps trailing ones.
        if let host = hosts.first, Self.trimmed(host[...]).contains(where: { $0 < 0x20 || $0 == 0x7F }) {
            return Refusal(code: .badHost, message: "the Host field holds a NUL or a control byte (RFC 9112 §3.2)")
        }
        if hosts.isEmpty && isHTTP11 {
            return Refusal(code: .badHost, message: "an HTTP/1.1 request must carry a Host field (RFC 9112 §3.2)")
        }
        return nil
    }

    private static func equalsIgnoringCase(_ bytes: UnsafeRawBufferPointer, _ lowercase: StaticString) -> Bool {
        let other = UnsafeBufferPointer(start: lowercase.utf8Start, count: lowercase.utf8CodeUnitCount)
        guard bytes.count == other.count else { return false }
        return zip(bytes, other).allSatisfy { ((0x41...0x5A).contains($0) ? $0 | 0x20 : $0) == $1 }
    }

    private static func trimmed(_ bytes: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        var slice = bytes
        while let first = slice.first, first == 0x20 || first == 0x09 { slice.removeFirst() }
        while let last = slice.last, last == 0x20 || last == 0x09 { slice.removeLast() }
        return slice
    }
}

/// A request's head as libmicrohttpd parsed it, read in one walk of its
/// header fields at the first access call: the fields for the handler,
/// their framing and how many there are. Kept in the request's context
/// until the request is whole.
struct RequestHead {
    var headers = HTTPHeaders()
    var framing = RequestFraming()
    /// Header fields as sent (a repeated one counted each time).
    var count = 0
}

extension RequestHead {
    /// Carries the head through libmicrohttpd's `void *` argument.
    private final class Collector {
        var head = RequestHead()
        /// Where the previous field's value ended (its terminating NUL).
        var previousEnd: UnsafeRawPointer?

        /// Checks the bytes after the previous value: up to `nextKey` (the
        /// next field's name), or for the last field a run of at least two NULs.
        func closePrevious(nextKey: UnsafeRawPointer?) {
            guard let end = previousEnd else { return }
            previousEnd = nil
            var cursor = end
            var nuls = 0
            // Bounded: a line end and blanks trimmed from a value are a few bytes.
            for _ in 0..<64 {
                if let nextKey, cursor == nextKey { return }
                let byte = cursor.load(as: UInt8.self)
                guard byte == 0 || byte == 0x20 || byte == 0x09 else { break }
                if byte == 0 { nuls += 1 }
                if nextKey == nil && nuls >= 2 { return }
                cursor += 1
            }
            head.framing.hiddenNULInLastValue()
        }

        func add(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {
            head.count += 1
            head.framing.add(name: name, value: value)
            head.headers.append(String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self))
        }
    }

    /// The head of a connection's request, each value read with its length
    /// (`MHD_get_connection_values_n`).
    ///
    /// libmicrohttpd (0.9.75) measures a value with `strlen`, so a NUL inside
    /// one cuts it silently. It parses the head in place, each line's end
    /// overwritten with NULs, so what follows a value up to the next field's
    /// name may only be NULs and blanks (and after the last field, its line
    /// end and the empty line: at least two NULs). Anything else there was
    /// behind a NUL inside the value: the value is marked as holding one.
    static func read(_ connection: OpaquePointer) -> RequestHead {
        let collector = Collector()
        withExtendedLifetime(collector) {
            _ = MHD_get_connection_values_n(
                connection, .HEADER_KIND,
                { cls, _, key, keySize, value, valueSize in
                    guard let cls, let key else { return .YES }
                    let collector = Unmanaged<Collector>.fromOpaque(cls).takeUnretainedValue()
                    collector.closePrevious(nextKey: UnsafeRawPointer(key))
                    collector.add(
                        name: UnsafeRawBufferPointer(start: key, count: keySize),
                        value: UnsafeRawBufferPointer(start: value, count: value == nil ? 0 : valueSize))
                    collector.previousEnd = value.map { UnsafeRawPointer($0) + valueSize }
                    return .YES
                }, Unmanaged.passUnretained(collector).toOpaque())
        }
        collector.closePrevious(nextKey: nil)
        return collector.head
    }
}
