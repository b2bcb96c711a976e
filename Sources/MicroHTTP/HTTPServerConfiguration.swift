/// Settings for an `HTTPServer`: where it listens and every bound it enforces.
///
/// Every field has a named default; `HTTPServerConfiguration()` is a loopback
/// server on port 8080 with one epoll thread.
public struct HTTPServerConfiguration: Sendable {
    /// Default listen address: IPv4 loopback.
    public static let defaultHost = "127.0.0.1"
    /// Default TCP port.
    public static let defaultPort: UInt16 = 8080
    /// Default number of libmicrohttpd polling threads.
    public static let defaultHTTPThreads = 1
    /// Default limit on simultaneous connections (libmicrohttpd's own default).
    public static let defaultConnectionLimit = 1020
    /// Default limit on simultaneous connections from one IP address.
    public static let defaultPerIPConnectionLimit = 64
    /// Default idle timeout of a connection, in seconds.
    public static let defaultConnectionTimeout: Double = 30
    /// Default memory per connection (headers and read buffer), in bytes.
    public static let defaultConnectionMemoryLimit = 64 * 1024
    /// Default largest accepted request body, in bytes.
    public static let defaultMaxBodyBytes = 65536
    /// Default bound on the bytes an event stream may hold for a slow client.
    public static let defaultSSEBufferBytes = 256 * 1024
    /// Default interval between event-stream heartbeats, in seconds.
    public static let defaultSSEHeartbeat: Double = 15
    /// Default time `stop()` waits for suspended requests and streams to finish, in seconds.
    public static let defaultShutdownGracePeriod: Double = 3
    /// Default seconds a client has to send a whole request (headers and body).
    public static let defaultRequestDeadline: Double = 10
    /// Default most connections still sending their request before the oldest is dropped.
    public static let defaultMaxPendingRequests = 256
    /// Default connections of the table kept free of connections that only read or idle.
    public static let defaultConnectionHeadroom = 32
    /// Bytes of answers queued and not yet taken by their clients, in all: 64 MiB.
    public static let defaultMaxHeldAnswerBytes = 64 << 20
    /// An answer up to this size is never refused by the held-answer budget
    /// (every refusal, probe and page of the API fits): 64 KiB.
    public static let alwaysAdmittedAnswerBytes = 64 << 10
    /// Default most query parameters read from a request line (more: 414).
    public static let defaultMaxQueryParameters = 100
    /// Default most header fields read from a request (more: 431).
    public static let defaultMaxHeaders = 100

    /// Address to bind: an IPv4 or IPv6 literal (`127.0.0.1`, `::1`, `0.0.0.0`, `::`) or a host name.
    public var host: String
    /// TCP port; 0 picks a free ephemeral port (read it back from `HTTPServer.port`).
    public var port: UInt16
    /// libmicrohttpd threads: 1 is one internal epoll thread, more is a thread pool of that size.
    public var httpThreads: Int
    /// Most simultaneous connections (`MHD_OPTION_CONNECTION_LIMIT`).
    public var connectionLimit: Int
    /// Most simultaneous connections per client IP (`MHD_OPTION_PER_IP_CONNECTION_LIMIT`).
    public var perIPConnectionLimit: Int
    /// Seconds of inactivity after which a connection is closed (whole seconds, at least 1).
    public var connectionTimeout: Double
    /// Memory per connection for headers and the read buffer (`MHD_OPTION_CONNECTION_MEMORY_LIMIT`).
    public var connectionMemoryLimit: Int
    /// Largest request body accepted; larger ones are answered with 413.
    public var maxBodyBytes: Int
    /// Bytes an event stream may buffer for its client before the client counts as too slow.
    public var sseBufferBytes: Int
    /// Seconds between `: ping` comments on an idle event stream.
    public var sseHeartbeat: Double
    /// Most seconds `stop()` waits for answered requests and ended streams to drain.
    public var shutdownGracePeriod: Double
    /// Seconds a client has to send a whole request, counted from the accept
    /// (or a kept-alive connection's next request line); later, the connection is closed.
    public var requestDeadline: Double
    /// Most connections still sending their request; past it, the oldest one
    /// pending for over a second is closed (against slow-header floods).
    public var maxPendingRequests: Int
    /// Connections of the table kept free of pending ones (reading a request,
    /// or idle between requests): past `connectionLimit - connectionHeadroom`
    /// open connections, those pending for over half a second are closed (the
    /// oldest of the address with the most pending first), at each accept and
    /// by a timer; a connection younger than that is never closed for headroom.
    public var connectionHeadroom: Int
    /// Most query parameters a request line may carry (more: 414 `too_many_parameters`).
    public var maxQueryParameters: Int
    /// Most header fields a request may carry (more: 431 `too_many_headers`).
    public var maxHeaders: Int
    /// Bytes of answers (over `alwaysAdmittedAnswerBytes` each) queued on
    /// connections whose clients have not taken them yet, in all; an answer
    /// that would pass it is replaced by 503 `answers_over_budget`.
    public var maxHeldAnswerBytes: Int

    /// Creates a configuration; every argument defaults to its named default.
    public init(
        host: String = defaultHost,
        port: UInt16 = defaultPort,
        httpThreads: Int = defaultHTTPThreads,
        connectionLimit: Int = defaultConnectionLimit,
        perIPConnectionLimit: Int = defaultPerIPConnectionLimit,
        connectionTimeout: Double = defaultConnectionTimeout,
        connectionMemoryLimit: Int = defaultConnectionMemoryLimit,
        maxBodyBytes: Int = defaultMaxBodyBytes,
        sseBufferBytes: Int = defaultSSEBufferBytes,
        sseHeartbeat: Double = defaultSSEHeartbeat,
        shutdownGracePeriod: Double = defaultShutdownGracePeriod,
        requestDeadline: Double = defaultRequestDeadline,
        maxPendingRequests: Int = defaultMaxPendingRequests,
        connectionHeadroom: Int = defaultConnectionHeadroom,
        maxQueryParameters: Int = defaultMaxQueryParameters,
        maxHeaders: Int = defaultMaxHeaders,
        maxHeldAnswerBytes: Int = defaultMaxHeldAnswerBytes
    ) {
        self.host = host
        self.port = port
        self.httpThreads = httpThreads
        self.connectionLimit = connectionLimit
        self.perIPConnectionLimit = perIPConnectionLimit
        self.connectionTimeout = connectionTimeout
        self.connectionMemoryLimit = connectionMemoryLimit
        self.maxBodyBytes = maxBodyBytes
        self.sseBufferBytes = sseBufferBytes
        self.sseHeartbeat = sseHeartbeat
        self.shutdownGracePeriod = shutdownGracePeriod
        self.requestDeadline = requestDeadline
        self.maxPendingRequests = maxPendingRequests
        self.connectionHeadroom = connectionHeadroom
        self.maxQueryParameters = maxQueryParameters
        self.maxHeaders = maxHeaders
        self.maxHeldAnswerBytes = maxHeldAnswerBytes
    }
}
