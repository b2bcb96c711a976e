import Primitives
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Who may drive this runloopd from a browser: the `Host` allow-list (against
/// DNS rebinding) and the `Origin` check on state-changing requests (against
/// cross-site requests, which need no preflight when they have no body).
///
/// Pure logic over header values: no I/O, no state; the HTTP layer asks it
/// about every request before routing and answers a refusal as given.
///
/// Rules:
/// - `Host`: its name (case-insensitive, one trailing dot ignored, IP literals
///   compared in canonical form, any port) must be `localhost`, `127.0.0.1`,
///   `::1`, the bound address, or an `--allowed-host` name; when bound to a
///   wildcard address (`0.0.0.0`, `::`) any IP literal too, since a literal
///   cannot be rebound by DNS (and probes address pods by IP). `*` among the
///   allowed hosts turns the check off. A request without `Host` (HTTP/1.0)
///   passes: browsers always send one.
/// - State-changing methods (everything but GET, HEAD, OPTIONS): an `Origin`,
///   or without one a `Referer`, must be the server's own origin (`http`, or
///   `https` when a TLS proxy sends `X-Forwarded-Proto: https`, with the same
///   host and port as the request's `Host`, or `http://<allowed host>:<bound
///   port>`) or an `--allowed-origin`. The same holds for a read that claims
///   a budgeted place, `GET /api/events` (`guardsRead`). `Origin: null` (sandboxed frames,
///   `file:`) is refused. Requests with neither header (curl, scripts) pass.
/// - Preflights (`OPTIONS` with `Origin` and `Access-Control-Request-Method`):
///   a refused origin gets 403 and no CORS headers; an allowed one gets exactly
///   the methods and headers the API uses.
public struct RequestGuard: Sendable {
    /// The guard's answer for one request.
    public enum Verdict: Equatable, Sendable {
        /// Go on handling the request.
        case allow
        /// Answer with this JSON error and do nothing else.
        case refuse(status: Int, code: ErrorCode, message: String, field: String)
    }

    /// A configuration the guard cannot work with (a malformed flag value).
    public struct ConfigurationError: Error, Equatable, CustomStringConvertible {
        /// What is wrong, naming the flag.
        public let description: String
    }

    /// The methods the API answers (for preflights).
    public static let corsMethods = "GET, POST, DELETE"
    /// The request headers the API reads (for preflights).
    public static let corsHeaders = "Authorization, Content-Type, X-Request-Id"
    /// The response headers a cross-origin caller may read.
    public static let exposedHeaders = "Location, Retry-After, X-Request-Id, Allow, WWW-Authenticate"

    /// Host names (canonical, each once) any request may carry: a handful,
    /// compared in turn rather than hashed.
    let allowedHostNames: [String]
    /// The same names as bytes, for the check without a parse.
    private let allowedHostBytes: [[UInt8]]
    /// Whether the host check is off (`--allowed-host '*'`).
    public let allowsAnyHost: Bool
    /// Whether the server is bound to `0.0.0.0` or `::` (any IP literal is then a valid `Host`).
    let boundToWildcard: Bool
    /// `--allowed-origin` values, canonical (`scheme://host[:port]`, default port dropped).
    let allowedOrigins: Set<String>

    /// Creates the guard for a server bound to `boundHost`.
    ///
    /// - Parameters:
    ///   - boundHost: The `--host` the server listens on.
    ///   - allowedHosts: `--allowed-host` values: host names or IP literals (no
    ///     port, no scheme), or `*` for any host.
    ///   - allowedOrigins: `--allowed-origin` values: `http(s)://host[:port]`.
    /// - Throws: `ConfigurationError` naming the first malformed value.
    public init(boundHost: String, allowedHosts: [String] = [], allowedOrigins: [String] = [])
        throws(ConfigurationError)
    {
        var names: Set<String> = ["localhost", "127.0.0.1", "::1"]
        let bound = Self.authority(boundHost) ?? Self.authority("[\(boundHost)]")
        let wildcard = bound.map { $0.isIPLiteral && ($0.host == "0.0.0.0" || $0.host == "::") } ?? false
        if let bound, !wildcard { names.insert(bound.host) }
        var any = false
        for value in allowedHosts {
            let trimmed = Self.trimmed(value)
            if trimmed == "*" {
                any = true
                continue
            }
            guard let parsed = Self.authority(trimmed) ?? Self.authority("[\(trimmed)]"), parsed.port == nil else {
                throw ConfigurationError(
                    description: "--allowed-host '\(value)' is not a host name or IP literal (no scheme, no port)")
            }
            names.insert(parsed.host)
        }
        var origins: Set<String> = []
        for value in allowedOrigins {
            guard case .origin(let origin) = Self.origin(Self.trimmed(value), isReferer: false),
                origin.scheme == "http" || origin.scheme == "https"
            else {
                throw ConfigurationError(
                    description: "--allowed-origin '\(value)' is not an origin like https://dashboard.example:8443")
            }
            origins.insert(origin.serialized)
        }
        allowedHostNames = names.sorted()
        allowedHostBytes = allowedHostNames.map { Array($0.utf8) }
        allowsAnyHost = any
        boundToWildcard = wildcard
        self.allowedOrigins = origins
    }

    /// Whether `host` (a `--host` value) only accepts connections from this machine.
    public static func isLoopback(_ host: String) -> Bool {
        let name = host.lowercased()
        if name == "localhost" || name == "localhost." { return true }
        guard let parsed = authority(name) ?? authority("[\(name)]"), parsed.isIPLiteral else { return false }
        return parsed.host == "::1" || parsed.host.hasPrefix("127.")
    }

    /// Whether `method` may change state (anything but GET, HEAD and OPTIONS).
    public static func isStateChanging(_ method: String) -> Bool {
        !(method == "GET" || method == "HEAD" || method == "OPTIONS")
    }

    // MARK: - Checks

    /// The verdict for one request.
    ///
    /// - Parameters:
    ///   - method: The request method, upper-case.
    ///   - host: The `Host` header (`nil` when absent).
    ///   - origin: The `Origin` header (`nil` when absent).
    ///   - referer: The `Referer` header (`nil` when absent).
    ///   - scheme: The scheme the client used: `http`, or what a TLS proxy
    ///     says in `X-Forwarded-Proto` (`Self.scheme(forwardedProto:)`).
    ///   - guardsRead: Check the page's origin on a read too (`GET /api/events`:
    ///     a stream claims a place in a budget, and `EventSource` sends `Origin`).
    public func check(
        method: String, host: String?, origin: String?, referer: String?, scheme: String = "http",
        guardsRead: Bool = false
    ) -> Verdict {
        let preflight = method == "OPTIONS" && origin != nil
        let mayChange = Self.isStateChanging(method) || preflight || guardsRead
        var requestHost: Authority?
        if let host, !host.isEmpty {
            // The usual request (a read, or a change from curl or a script: no Origin,
            // no Referer) with the usual Host (127.0.0.1:8080) needs no parse.
            if (!mayChange || (origin == nil && referer == nil)) && isPlainAllowedHost(host) { return .allow }
            guard let parsed = Self.authority(host), allowsAnyHost || isAllowedHost(parsed) else {
                return Self.misdirected(host)
            }
            requestHost = parsed
        }
        guard mayChange else { return .allow }
        return checkSource(
            origin: origin, referer: referer, requestHost: requestHost, scheme: scheme, preflight: preflight)
    }

    /// The scheme a client used: `https` when a TLS proxy in front says so
    /// (`X-Forwarded-Proto: https`; a page cannot send that header across
    /// origins without a preflight, which the guard refuses), else `http`.
    public static func scheme(forwardedProto: String?) -> String {
        guard let proto = forwardedProto else { return "http" }
        return trimmed(proto).lowercased() == "https" ? "https" : "http"
    }

    /// 421 for a Host this runloopd does not answer to.
    private static func misdirected(_ host: String) -> Verdict {
        .refuse(
            status: 421, code: .misdirectedHost,
            message:
                "Host '\(printable(host))' is not one this runloopd answers to (DNS rebinding guard): "
                + "use localhost, 127.0.0.1 or [::1], or start runloopd with --allowed-host <name> "
                + "(RUNLOOPD_ALLOWED_HOST)",
            field: "Host")
    }

    /// Whether a change (or a preflight) may come from the page that sent it:
    /// its Origin, else its Referer; neither (curl, scripts) is allowed.
    private func checkSource(
        origin: String?, referer: String?, requestHost: Authority?, scheme: String, preflight: Bool
    ) -> Verdict {
        let header: String
        let value: String
        if let origin {
            (header, value) = ("Origin", origin)
        } else if let referer {
            (header, value) = ("Referer", referer)
        } else {
            return .allow  // not from a browser page: curl, scripts
        }
        if isAllowed(source: value, isReferer: header == "Referer", requestHost: requestHost, scheme: scheme) {
            return .allow
        }
        return .refuse(
            status: 403, code: .forbiddenOrigin,
            message:
                "\(header) '\(Self.printable(value))' may not \(preflight ? "call" : "change") this runloopd: only its "
                + "own pages may, or origins given with --allowed-origin (RUNLOOPD_ALLOWED_ORIGIN)",
            field: header)
    }

    /// The CORS headers for a response to a request from `origin`: none for a
    /// same-origin or refused caller, `Access-Control-Allow-Origin` (and what a
    /// caller may read) for an `--allowed-origin`.
    public func corsHeaders(origin: String?, host: String?) -> [(String, String)] {
        // Without --allowed-origin (the usual case) there is nothing to parse.
        guard !allowedOrigins.isEmpty, let origin, case .origin(let parsed) = Self.origin(origin, isReferer: false),
            allowedOrigins.contains(parsed.serialized),
            !isSameOrigin(parsed, requestHost: host.flatMap { Self.authority($0) })
        else { return [] }
        return [
            ("Access-Control-Allow-Origin", origin), ("Vary", "Origin"),
            ("Access-Control-Expose-Headers", Self.exposedHeaders),
        ]
    }

    /// The answer headers for a preflight the guard allowed: exactly the
    /// methods and request headers the API uses.
    public func preflightHeaders(origin: String) -> [(String, String)] {
        [
            ("Access-Control-Allow-Origin", origin), ("Access-Control-Allow-Methods", Self.corsMethods),
            ("Access-Control-Allow-Headers", Self.corsHeaders), ("Access-Control-Max-Age", "600"),
            ("Vary", "Origin, Access-Control-Request-Method, Access-Control-Request-Headers"),
        ]
    }

    /// Whether `host` is an allowed name exactly as the allow-list holds it
    /// (lower-case, canonical, no trailing dot, not bracketed), with an optional
    /// port: what `authority` would parse to an allowed host, checked without
    /// parsing. Anything else takes the full parse.
    private func isPlainAllowedHost(_ host: String) -> Bool {
        var host = host
        return host.withUTF8 { bytes in
            guard bytes.first != UInt8(ascii: "[") else { return false }
            var name = bytes[...]
            if let colon = bytes.firstIndex(of: UInt8(ascii: ":")) {
                guard Self.port(bytes[(colon + 1)...]) != nil else { return false }
                name = bytes[..<colon]
            }
            return allowedHostBytes.contains { $0.count == name.count && $0.elementsEqual(name) }
        }
    }

    /// The port in `digits` (1–5 ASCII digits, at most 65535), or nil.
    static func port<Digits: Collection<UInt8>>(_ digits: Digits) -> Int? {
        guard (1...5).contains(digits.count), digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        let value = digits.reduce(0) { $0 * 10 + Int($1 - 0x30) }
        return value <= 65535 ? value : nil
    }

    private func isAllowedHost(_ host: Authority) -> Bool {
        allowedHostNames.contains(host.host) || (boundToWildcard && host.isIPLiteral)
    }

    private func isAllowed(source: String, isReferer: Bool, requestHost: Authority?, scheme: String) -> Bool {
        guard case .origin(let origin) = Self.origin(source, isReferer: isReferer) else { return false }
        if allowedOrigins.contains(origin.serialized) { return true }
        // Only the address the request was sent to is this server's own: another
        // loopback name or address on the same port (`[::1]:8080` beside
        // `127.0.0.1:8080`) can be another server's page.
        return isSameOrigin(origin, requestHost: requestHost, scheme: scheme)
    }

    /// The page's origin names the scheme, host and port the request was sent
    /// to (`http`, or `https` through a TLS proxy that says so).
    private func isSameOrigin(_ origin: Origin, requestHost: Authority?, scheme: String = "http") -> Bool {
        guard let requestHost, origin.scheme == scheme, allowsAnyHost || isAllowedHost(requestHost),
            origin.host == requestHost.host
        else { return false }
        // A Host without a port is the scheme's default port (behind a TLS proxy: 443).
        return origin.port == (requestHost.port ?? Origin.defaultPort(origin.scheme))
    }
}
