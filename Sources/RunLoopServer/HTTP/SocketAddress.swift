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
        let length: socklen_t
        switch Int32(address.pointee.sa_family) {
        case AF_INET: length = socklen_t(MemoryLayout<sockaddr_in>.size)
        case AF_INET6: length = socklen_t(MemoryLayout<sockaddr_in6>.size)
        default: return nil
        }
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        let status = getnameinfo(address, length, &host, socklen_t(host.count), nil, 0, NI_NUMERICHOST)
        guard status == 0 else { return nil }
        return String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
