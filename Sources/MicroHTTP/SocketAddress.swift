#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// A resolved listen address (`sockaddr_in` or `sockaddr_in6` bytes).
struct SocketAddress {
    /// The raw `sockaddr` bytes.
    var storage: [UInt8]
    /// Whether it is an IPv6 address.
    var isIPv6: Bool

    /// Resolves `host` (an IPv4/IPv6 literal or a name) and sets `port`.
    static func resolve(host: String, port: UInt16) -> SocketAddress? {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_flags = AI_PASSIVE
        #if canImport(Glibc)
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
            hints.ai_socktype = SOCK_STREAM
        #endif
        var list: UnsafeMutablePointer<addrinfo>?
        let literal = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        guard getaddrinfo(literal, nil, &hints, &list) == 0, let first = list else { return nil }
        defer { freeaddrinfo(list) }
        var node: UnsafeMutablePointer<addrinfo>? = first
        while let current = node {
            if let address = current.pointee.ai_addr {
                switch Int32(current.pointee.ai_family) {
                case AF_INET:
                    var v4 = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee }
                    v4.sin_port = port.bigEndian
                    return SocketAddress(storage: withUnsafeBytes(of: &v4) { Array($0) }, isIPv6: false)
                case AF_INET6:
                    var v6 = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee }
                    v6.sin6_port = port.bigEndian
                    return SocketAddress(storage: withUnsafeBytes(of: &v6) { Array($0) }, isIPv6: true)
                default:
                    break
                }
            }
            node = current.pointee.ai_next
        }
        return nil
    }

    /// The numeric host text of a peer address (`127.0.0.1`, `::1`), or `nil`.
    static func numericHost(_ address: UnsafePointer<sockaddr>) -> String? {
        // inet_ntop, not getnameinfo: this runs for every request.
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: Int(INET6_ADDRSTRLEN)) { buffer in
            let size = socklen_t(buffer.count)
            let text: UnsafePointer<CChar>?
            switch Int32(address.pointee.sa_family) {
            case AF_INET:
                text = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { v4 in
                    withUnsafePointer(to: v4.pointee.sin_addr) { inet_ntop(AF_INET, $0, buffer.baseAddress, size) }
                }
            case AF_INET6:
                text = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { v6 in
                    withUnsafePointer(to: v6.pointee.sin6_addr) { inet_ntop(AF_INET6, $0, buffer.baseAddress, size) }
                }
            default:
                text = nil
            }
            return text.map { String(cString: $0) }
        }
    }
}
