import ArgumentParser
import MicroHTTP
import RunLoopServer

/// Where the server listens and the bounds of its HTTP layer.
struct HTTPOptions: ParsableArguments {
    @Option(help: "Address to bind (127.0.0.1, ::1, 0.0.0.0).")
    var host = Setting(HTTPServerConfiguration.defaultHost, env: "HOST")

    @Option(help: "TCP port (0 picks a free one).")
    var port = Setting(HTTPServerConfiguration.defaultPort, env: "PORT")

    @Option(help: "libmicrohttpd threads: 1 = one epoll thread, N > 1 = a pool (1...64).")
    var httpThreads = Setting(Count(HTTPServerConfiguration.defaultHTTPThreads), env: "HTTP_THREADS")

    @Option(help: "Largest request body (413 beyond), e.g. 65536 or 64KB.")
    var maxBody = Setting(ByteSize(Int64(HTTPServerConfiguration.defaultMaxBodyBytes)), env: "MAX_BODY")

    @Option(help: "Memory per connection for its headers and read buffer (4096 bytes...64MB).")
    var connectionMemory = Setting(
        ByteSize(Int64(HTTPServerConfiguration.defaultConnectionMemoryLimit)), env: "CONNECTION_MEMORY")

    @Option(help: "Bytes an event stream may hold for a slow client before it counts as too slow (1024...64MB).")
    var eventStreamBuffer = Setting(
        ByteSize(Int64(HTTPServerConfiguration.defaultSSEBufferBytes)), env: "EVENT_STREAM_BUFFER")

    @Option(help: "Time between heartbeat comments on an idle event stream (0.1 s...1h).")
    var eventStreamHeartbeat = Setting(
        Seconds(HTTPServerConfiguration.defaultSSEHeartbeat), env: "EVENT_STREAM_HEARTBEAT")

    @Option(help: "Concurrent connections (at least 1).")
    var maxConnections = Setting(Count(HTTPServerConfiguration.defaultConnectionLimit), env: "MAX_CONNECTIONS")

    @Option(help: "Concurrent connections from one IP address (0: no limit).")
    var maxConnectionsPerIp = Setting(
        Count(HTTPServerConfiguration.defaultPerIPConnectionLimit), env: "MAX_CONNECTIONS_PER_IP")

    @Option(help: "Idle connection timeout.")
    var connectionTimeout = Setting(
        Seconds(HTTPServerConfiguration.defaultConnectionTimeout), env: "CONNECTION_TIMEOUT")

    @Option(
        help:
            "Time a client has to send a whole request (headers and body), from its connection or the end of the previous answer; then it is closed (0.1 s...1d)."
    )
    var requestDeadline = Setting(Seconds(HTTPServerConfiguration.defaultRequestDeadline), env: "REQUEST_DEADLINE")

    @Option(help: "Connections sending a request or idle between requests; past it the oldest (over 1 s) is closed.")
    var maxPendingRequests = Setting(
        Count(HTTPServerConfiguration.defaultMaxPendingRequests), env: "MAX_PENDING_REQUESTS")

    @Option(
        help:
            "Connections kept free of those only reading or idle: past --max-connections minus this, those pending over 0.5 s are closed, the busiest address's oldest first (at most half the limit)."
    )
    var connectionHeadroom = Setting(
        Count(HTTPServerConfiguration.defaultConnectionHeadroom), env: "CONNECTION_HEADROOM")

    @Option(
        help:
            "Bytes of answers (over 64 KiB each) queued for clients that have not taken them yet, in all; past it such an answer is 503 answers_over_budget (1MB...4GB)."
    )
    var maxHeldAnswerBytes = Setting(
        ByteSize(Int64(HTTPServerConfiguration.defaultMaxHeldAnswerBytes)), env: "MAX_HELD_ANSWER_BYTES")

    @Option(help: "Query parameters a request may carry (more: 414).")
    var maxQueryParams = Setting(Count(HTTPServerConfiguration.defaultMaxQueryParameters), env: "MAX_QUERY_PARAMS")

    @Option(help: "Header fields a request may carry (more: 431).")
    var maxHeaders = Setting(Count(HTTPServerConfiguration.defaultMaxHeaders), env: "MAX_HEADERS")

    @Option(help: "Event-stream (SSE) clients at once.")
    var maxEventClients = Setting(Count(APILimits().maxEventClients), env: "MAX_EVENT_CLIENTS")

    @Option(help: "Event-stream (SSE) clients at once from one IP address (0: no limit).")
    var maxEventClientsPerIp = Setting(
        Count(APILimits().maxEventClientsPerAddress), env: "MAX_EVENT_CLIENTS_PER_IP")

    @Option(help: "Requests queued for the control loop before 503.")
    var maxQueuedRequests = Setting(Count(ServiceConfiguration().maxQueuedRequests), env: "MAX_QUEUED_REQUESTS")

    @Option(help: "A dashboard folder served at / instead of the one compiled in.")
    var publicDir = Setting(ServiceConfiguration().publicDirectory, env: "PUBLIC_DIR")

    mutating func validate() throws {
        try resolve(
            \.host, \.port, \.httpThreads, \.maxBody, \.connectionMemory, \.eventStreamBuffer, \.eventStreamHeartbeat,
            \.maxConnections, \.maxConnectionsPerIp, \.connectionTimeout,
            \.requestDeadline, \.maxPendingRequests, \.connectionHeadroom, \.maxQueryParams, \.maxHeaders,
            \.maxHeldAnswerBytes, \.maxEventClients, \.maxEventClientsPerIp, \.maxQueuedRequests, \.publicDir)
        try httpThreads.check("--http-threads", 1...64, "1...64")
        try maxBody.check("--max-body", ByteSize(0)...ByteSize(Int64(Int32.max)), "0...2147483647 bytes")
        try connectionMemory.check("--connection-memory", ByteSize(4096)...ByteSize(64_000_000), "4096...64MB")
        try eventStreamBuffer.check("--event-stream-buffer", ByteSize(1024)...ByteSize(64_000_000), "1024...64MB")
        try eventStreamHeartbeat.check("--event-stream-heartbeat", Seconds(0.1)...Seconds(3600), "0.1 s...1h")
        try maxConnections.check("--max-connections", 1..., "at least 1")
        try connectionTimeout.check("--connection-timeout", Seconds(0.001)...Seconds(86_400), "0.001 s...1d")
        try requestDeadline.check("--request-deadline", Seconds(0.1)...Seconds(86_400), "0.1 s...1d")
        try maxPendingRequests.check("--max-pending-requests", 1..., "at least 1")
        try maxHeldAnswerBytes.check(
            "--max-held-answer-bytes", ByteSize(1_000_000)...ByteSize(4_000_000_000), "1MB...4GB")
        try maxQueryParams.check("--max-query-params", 1..., "at least 1")
        try maxHeaders.check("--max-headers", 1..., "at least 1")
        try maxQueuedRequests.check("--max-queued-requests", 1..., "at least 1")
    }

    /// The HTTP layer's part of the configuration.
    func apply(to config: inout ServiceConfiguration) {
        config.http.host = host.value
        config.http.port = port.value
        config.http.httpThreads = httpThreads.count
        config.http.maxBodyBytes = Int(maxBody.bytes)
        config.http.connectionMemoryLimit = Int(connectionMemory.bytes)
        config.http.sseBufferBytes = Int(eventStreamBuffer.bytes)
        config.http.sseHeartbeat = eventStreamHeartbeat.seconds
        config.http.connectionLimit = maxConnections.count
        config.http.perIPConnectionLimit = maxConnectionsPerIp.count
        config.http.connectionTimeout = connectionTimeout.seconds
        config.http.requestDeadline = requestDeadline.seconds
        config.http.maxPendingRequests = maxPendingRequests.count
        config.http.connectionHeadroom = connectionHeadroom.count
        config.http.maxHeldAnswerBytes = Int(maxHeldAnswerBytes.bytes)
        config.http.maxQueryParameters = maxQueryParams.count
        config.http.maxHeaders = maxHeaders.count
        config.api.maxEventClients = maxEventClients.count
        config.api.maxEventClientsPerAddress = maxEventClientsPerIp.count
        config.maxQueuedRequests = maxQueuedRequests.count
        config.publicDirectory = publicDir.value
    }
}
