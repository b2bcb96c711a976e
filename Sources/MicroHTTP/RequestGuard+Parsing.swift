#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Parsing what the checks compare: `Host` authorities, `Origin` and `Referer`
/// values, IP literals made canonical.
extension RequestGuard {
    /// A host and optional port, as in a `Host` header: the host lower-cased,
    /// without one trailing dot, IP literals canonical (IPv6 without brackets).
    struct Authority: Equatable {
        var host: String
        var port: Int?
        var isIPLiteral: Bool
    }

    /// A serialized origin (`scheme://host[:port]`), parsed.
    struct Origin: Equatable {
        var scheme: String
        var host: String
        var port: Int
        var isIPv6: Bool

        static func defaultPort(_ scheme: String) -> Int { scheme == "https" ? 443 : 80 }

        /// `scheme://host[:port]`, the default port left out.
        var serialized: String {
            let name = isIPv6 ? "[\(host)]" : host
            return port == Self.defaultPort(scheme) ? "\(scheme)://\(name)" : "\(scheme)://\(name):\(port)"
        }
    }

    enum OriginValue: Equatable {
        case origin(Origin)
        case opaque  // "null"
        case malformed
    }

    /// Parses `host[:port]`, `[v6]` or `[v6]:port`; nil when malformed.
    static func authority(_ text: String) -> Authority? {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty, bytes.count <= 255, let (hostPart, portPart, bracketed) = split(bytes) else {
            return nil
        }
        var port: Int?
        if let portPart {
            guard let value = Self.port(portPart) else { return nil }
            port = value
        }
        if bracketed {
            guard let canonical = canonicalIP(String(decoding: hostPart, as: UTF8.self), family: AF_INET6) else {
                return nil
            }
            return Authority(host: canonical, port: port, isIPLiteral: true)
        }
        var name = hostPart
        if name.last == UInt8(ascii: ".") { name.removeLast() }
        guard !name.isEmpty, name.allSatisfy(isHostNameByte) else { return nil }
        let host = String(decoding: name, as: UTF8.self).lowercased()
        if let canonical = canonicalIP(host, family: AF_INET) {
            return Authority(host: canonical, port: port, isIPLiteral: true)
        }
        return Authority(host: host, port: port, isIPLiteral: false)
    }

    /// An authority's host and port parts, and whether the host was in
    /// brackets (an IPv6 literal); nil when the brackets or the colon are wrong.
    private static func split(_ bytes: [UInt8]) -> (host: [UInt8], port: [UInt8]?, bracketed: Bool)? {
        if bytes[0] == UInt8(ascii: "[") {
            guard let close = bytes.firstIndex(of: UInt8(ascii: "]")) else { return nil }
            let rest = bytes[(close + 1)...]
            guard rest.isEmpty || rest.first == UInt8(ascii: ":") else { return nil }
            return (Array(bytes[1..<close]), rest.isEmpty ? nil : Array(rest.dropFirst()), true)
        }
        if let colon = bytes.firstIndex(of: UInt8(ascii: ":")) {
            return (Array(bytes[..<colon]), Array(bytes[(colon + 1)...]), false)
        }
        return (bytes, nil, false)
    }

    /// A letter, digit, `-`, `.` or `_`: what a host name may hold.
    private static func isHostNameByte(_ byte: UInt8) -> Bool {
        (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x30 && byte <= 0x39)
            || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_")
    }

    /// Parses an `Origin` value, or the origin part of a `Referer` URL.
    static func origin(_ text: String, isReferer: Bool) -> OriginValue {
        if !isReferer && text == "null" { return .opaque }
        // No space or control character belongs in either (repeated fields are joined with ", ").
        guard !text.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F }) else { return .malformed }
        guard let separator = text.range(of: "://") else { return .malformed }
        let scheme = text[..<separator.lowerBound].lowercased()
        guard !scheme.isEmpty,
            scheme.utf8.allSatisfy({
                ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2B || $0 == 0x2D || $0 == 0x2E
            })
        else { return .malformed }
        var rest = text[separator.upperBound...]
        if isReferer, let end = rest.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) {
            rest = rest[..<end]
        }
        guard !rest.contains("@"), !rest.contains("/"), let authority = authority(String(rest)) else {
            return .malformed
        }
        let port = authority.port ?? Origin.defaultPort(scheme)
        let isIPv6 = authority.isIPLiteral && authority.host.contains(":")
        return .origin(Origin(scheme: scheme, host: authority.host, port: port, isIPv6: isIPv6))
    }

    /// The canonical text of an IP literal (`inet_pton` then `inet_ntop`), or nil.
    static func canonicalIP(_ text: String, family: Int32) -> String? {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 16) { address in
            guard inet_pton(family, text, address.baseAddress) == 1 else { return nil }
            return withUnsafeTemporaryAllocation(of: CChar.self, capacity: Int(INET6_ADDRSTRLEN)) { buffer in
                guard inet_ntop(family, address.baseAddress, buffer.baseAddress, socklen_t(buffer.count)) != nil
                else { return nil }
                return String(cString: buffer.baseAddress!)
            }
        }
    }

    /// `text` without leading and trailing spaces and tabs.
    static func trimmed(_ text: String) -> String {
        let blank: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = text.firstIndex(where: { !blank($0) }), let last = text.lastIndex(where: { !blank($0) })
        else { return "" }
        return String(text[first...last])
    }

    /// `text` cut to 100 printable ASCII characters, for messages.
    static func printable(_ text: String) -> String {
        let clean = String(
            text.unicodeScalars.prefix(100).map { $0.value >= 0x20 && $0.value < 0x7F ? Character($0) : "?" })
        return text.unicodeScalars.count > 100 ? clean + "…" : clean
    }
}
