import Primitives

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

    /// The peer address of `address` (IPv4 or IPv6), or `nil` for other families.
    static func peer(_ address: UnsafePointer<sockaddr>) -> PeerAddress? {
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
            let v4 = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
            return PeerAddress(storage: .v4(v4))
        case AF_INET6:
            let v6 = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_addr }
            return PeerAddress(storage: .v6(v6))
        default:
            return nil
        }
    }
}

/// A request's peer: the address bytes, copied when the request arrives and
/// turned into text (`127.0.0.1`, `::1`) only when someone reads it (the access
/// log), not for every request.
public struct PeerAddress: Sendable {
    enum Storage {
        case v4(in_addr)
        case v6(in6_addr)
        case text(String)
    }

    let storage: Storage

    /// A peer known only by a name (`setup` for requests a setup file made).
    public init(text: String) {
        storage = .text(text)
    }

    init(storage: Storage) {
        self.storage = storage
    }

    /// The numeric host text (IPv4 by hand, IPv6 by `inet_ntop`).
    public var text: String {
        switch storage {
        case .text(let text):
            return text
        case .v4(let address):
            // s_addr holds the bytes in network order, first octet lowest in memory.
            return withUnsafeBytes(of: address.s_addr) { octets in
                var text: [UInt8] = []
                text.reserveCapacity(15)
                for (index, octet) in octets.enumerated() {
                    if index > 0 { text.append(UInt8(ascii: ".")) }
                    text.appendDecimal(Int(octet))
                }
                return String(decoding: text, as: UTF8.self)
            }
        case .v6(var address):
            return withUnsafeTemporaryAllocation(of: CChar.self, capacity: Int(INET6_ADDRSTRLEN)) { buffer in
                inet_ntop(AF_INET6, &address, buffer.baseAddress, socklen_t(buffer.count)).map { String(cString: $0) }
                    ?? "?"
            }
        }
    }
}
