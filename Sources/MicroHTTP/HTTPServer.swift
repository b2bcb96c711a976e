import Primitives
import CMicroHTTPD
import Dispatch
import Logging

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// An HTTP/1.1 server on libmicrohttpd that hands every complete request to an
/// `HTTPRequestHandler` and writes the `HTTPResponse` it is given, now or later.
///
/// libmicrohttpd threads never wait for an answer: a request not answered
/// inside `handle` has its connection suspended until `respond` is called
/// (from any thread), then resumed. Bodies are bounded, event streams are
/// bounded, and `stop()` answers whatever is still waiting before it returns.
public final class HTTPServer: Sendable {
    // @unchecked: the daemon pointer is libmicrohttpd's, whose calls are thread-safe.
    private enum Lifecycle: @unchecked Sendable {
        case idle
        /// `start()` is starting libmicrohttpd (outside the lock).
        case starting
        case running(daemon: OpaquePointer, port: UInt16)
        case stopping
        case stopped
    }

    /// The settings this server was created with.
    public let configuration: HTTPServerConfiguration
    private let core: HTTPServerCore
    private let logger: Logger
    private let lifecycle = Locked(Lifecycle.idle)

    /// Creates a server; nothing listens until `start()`.
    ///
    /// - Parameters:
    ///   - configuration: Address, threads and bounds.
    ///   - handler: Receives every complete request (on a libmicrohttpd thread; must not block).
    ///   - logger: Where the server and libmicrohttpd report.
    public init(
        configuration: HTTPServerConfiguration = HTTPServerConfiguration(), handler: any HTTPRequestHandler,
        logger: Logger
    ) {
        self.configuration = configuration
        self.logger = logger
        core = HTTPServerCore(configuration: configuration, handler: handler, logger: logger)
    }

    deinit {
        stop()
    }

    /// The bound TCP port while running (the real one when configured with 0);
    /// the configured port otherwise.
    public var port: UInt16 {
        lifecycle.withLock { state in
            if case .running(_, let port) = state { return port }
            return configuration.port
        }
    }

    /// Whether the server is accepting connections.
    public var isRunning: Bool {
        lifecycle.withLock { state in
            if case .running = state { return true }
            return false
        }
    }

    /// Request contexts still held (0 once every connection has finished); for leak checks.
    var liveRequestCount: Int { core.liveRequestCount }

    /// Event streams still attached to connections.
    var liveStreamCount: Int { core.liveStreamCount }

    /// Connections open and pending now, and those the request budgets closed.
    public var connectionCounts: HTTPConnectionCounts {
        var counts = core.deadlines.counts
        counts.badFraming = core.framingRefusals.load(ordering: .relaxed)
        counts.streamsHungUp = core.hangups.noticed.load(ordering: .relaxed)
        counts.heldAnswerBytes = core.heldAnswerBytes.load(ordering: .relaxed)
        counts.answersOverBudget = core.answersOverBudget.load(ordering: .relaxed)
        return counts
    }

    /// Binds the address and starts libmicrohttpd's thread(s).
    ///
    /// - Throws: `HTTPServerError` when the configuration is invalid, the host
    ///   does not resolve, the port is taken, or the server was already started.
    public func start() throws {
        // Claimed under the lock, started after it: libmicrohttpd starts threads
        // and calls back (its logger) while starting, which is foreign code.
        try lifecycle.withLock { state throws(HTTPServerError) in
            guard case .idle = state else {
                throw HTTPServerError(kind: .alreadyStarted, message: "the HTTP server was already started")
            }
            state = .starting
        }
        let daemon: OpaquePointer
        let port: UInt16
        do {
            (daemon, port) = try startDaemon()
        } catch {
            lifecycle.withLock { $0 = .idle }
            throw error
        }
        lifecycle.withLock { $0 = .running(daemon: daemon, port: port) }
        logger.info(
            "HTTP server listening",
            metadata: [
                "host": "\(configuration.host)", "port": .stringConvertible(Int(port)),
                "threads": .stringConvertible(configuration.httpThreads),
            ])
    }

    private func startDaemon() throws -> (OpaquePointer, UInt16) {
        try validate(configuration)
        guard let address = SocketAddress.resolve(host: configuration.host, port: configuration.port) else {
            throw HTTPServerError(
                kind: .invalidAddress, message: "cannot resolve listen host '\(configuration.host)'")
        }
        var flags =
            MHD_USE_INTERNAL_POLLING_THREAD.rawValue | MHD_USE_EPOLL.rawValue
            | MHD_ALLOW_SUSPEND_RESUME.rawValue | MHD_USE_ERROR_LOG.rawValue
        if address.isIPv6 { flags |= MHD_USE_IPv6.rawValue }

        let coreCls = Unmanaged.passUnretained(core).toOpaque()
        core.beginStartup()
        let daemon: OpaquePointer? = address.storage.withUnsafeBytes { raw in
            var options = runloopd_mhd_start_options()
            options.flags = flags
            options.address = raw.baseAddress?.assumingMemoryBound(to: sockaddr.self)
            options.thread_pool_size = UInt32(configuration.httpThreads)
            options.connection_limit = UInt32(configuration.connectionLimit)
            options.per_ip_connection_limit = UInt32(configuration.perIPConnectionLimit)
            options.connection_timeout_seconds = UInt32(configuration.connectionTimeout.rounded(.up))
            options.connection_memory_limit = configuration.connectionMemoryLimit
            options.access_handler = HTTPServerCore.accessHandler
            options.access_handler_cls = coreCls
            options.request_completed = HTTPServerCore.requestCompleted
            options.request_completed_cls = coreCls
            options.notify_connection = HTTPServerCore.notifyConnection
            options.notify_connection_cls = coreCls
            options.uri_log = HTTPServerCore.uriLog
            options.uri_log_cls = coreCls
            options.logger = core.loggerSink
            return runloopd_mhd_start(&options)
        }
        let messages = core.endStartup()
        guard let daemon else {
            var detail = messages.isEmpty ? "" : ": " + messages.joined(separator: "; ")
            if messages.contains(where: { $0.contains("Address already in use") }) {
                detail +=
                    " (another process listens on port \(configuration.port): stop it, or pick another --port; 0 picks a free one)"
            }
            throw HTTPServerError(
                kind: .startFailed,
                message: "cannot listen on \(configuration.host) port \(configuration.port)\(detail)")
        }
        let bound = runloopd_mhd_bind_port(daemon)
        return (daemon, bound == 0 ? configuration.port : bound)
    }

    private func validate(_ c: HTTPServerConfiguration) throws {
        func check(_ ok: Bool, _ what: String) throws {
            if !ok { throw HTTPServerError(kind: .invalidConfiguration, message: what) }
        }
        try check((1...1024).contains(c.httpThreads), "httpThreads must be between 1 and 1024")
        try check(c.connectionLimit >= 1 && c.connectionLimit <= Int(UInt32.max), "connectionLimit must be ≥ 1")
        try check(
            c.perIPConnectionLimit >= 0 && c.perIPConnectionLimit <= Int(UInt32.max),
            "perIPConnectionLimit must be ≥ 0 (0 = none)")
        try check(
            c.connectionTimeout.isFinite && c.connectionTimeout > 0 && c.connectionTimeout <= 86_400,
            "connectionTimeout must be > 0 and ≤ 86400 seconds")
        try check(c.connectionMemoryLimit >= 4096, "connectionMemoryLimit must be ≥ 4096 bytes")
        try check(
            c.requestDeadline.isFinite && c.requestDeadline >= 0.1 && c.requestDeadline <= 86_400,
            "requestDeadline must be ≥ 0.1 and ≤ 86400 seconds")
        try check(c.maxPendingRequests >= 1, "maxPendingRequests must be ≥ 1")
        try check(c.connectionHeadroom >= 0, "connectionHeadroom must be ≥ 0")
        try check(c.maxQueryParameters >= 1, "maxQueryParameters must be ≥ 1")
        try check(c.maxHeaders >= 1, "maxHeaders must be ≥ 1")
        try check(c.maxBodyBytes >= 0, "maxBodyBytes must be ≥ 0")
        try check(c.sseBufferBytes >= 1, "sseBufferBytes must be ≥ 1")
        try check(c.sseHeartbeat.isFinite && c.sseHeartbeat > 0, "sseHeartbeat must be > 0 seconds")
        try check(
            c.shutdownGracePeriod.isFinite && c.shutdownGracePeriod >= 0, "shutdownGracePeriod must be ≥ 0 seconds")
    }

    /// Runs `body` and resumes the connections its answers release only when it
    /// returns: a thread answering a batch of requests wakes libmicrohttpd once
    /// for all of them instead of once per answer. Answers given on other
    /// threads meanwhile are not held back.
    public func withBatchedResumes<Result>(_ body: () throws -> Result) rethrows -> Result {
        try core.withBatchedResumes(body)
    }

    /// Stops the server gracefully and returns once libmicrohttpd has stopped.
    ///
    /// Stops accepting connections, answers every request still waiting for an
    /// answer with 503 `shutting_down`, ends every event stream, waits up to
    /// `shutdownGracePeriod` (or `grace`, when shorter) for those to be
    /// written, then stops libmicrohttpd.
    /// Safe to call more than once and from any thread except a libmicrohttpd
    /// thread (that is, not from inside `handle`).
    public func stop(grace: Double? = nil) {
        let daemon: OpaquePointer? = lifecycle.withLock { state in
            guard case .running(let daemon, _) = state else { return nil }
            state = .stopping
            return daemon
        }
        guard let daemon else { return }

        let listenSocket = MHD_quiesce_daemon(daemon)
        let (contexts, streams) = core.beginStopping()
        for context in contexts {
            core.deliver(core.shuttingDown(), to: context)
        }
        for stream in streams {
            stream.finish(.serverStopping)
        }
        let seconds = max(0, min(configuration.shutdownGracePeriod, grace ?? .infinity, 3600))
        if !core.waitUntilDrained(deadline: .now() + .milliseconds(Int(seconds * 1000))) {
            logger.warning("HTTP server stopping with connections still writing")
        }
        MHD_stop_daemon(daemon)
        core.hangups.close()
        if listenSocket >= 0 { _ = close(listenSocket) }
        lifecycle.withLock { $0 = .stopped }
        logger.info("HTTP server stopped")
    }
}
