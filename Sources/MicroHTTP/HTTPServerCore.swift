import Primitives
import CMicroHTTPD
import Dispatch
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The object behind libmicrohttpd's callbacks: turns connections into
/// `HTTPRequest` values, hands them to the handler and queues the answers.
///
/// Passed to libmicrohttpd unretained; `HTTPServer` keeps it alive until the
/// daemon has stopped.
final class HTTPServerCore: Sendable {
    struct Registry {
        var stopping = false
        var outstanding: [ObjectIdentifier: HTTPRequestContext] = [:]
        var streams: [ObjectIdentifier: EventStream] = [:]
    }

    let configuration: HTTPServerConfiguration
    let handler: any HTTPRequestHandler
    let logger: Logger
    /// The request deadline and the cap on connections still sending their request.
    let deadlines: RequestDeadlines
    /// Ends an event stream as soon as its client hangs up.
    let hangups = StreamHangups()

    private let nextRequestID = Atomic<UInt64>(0)
    private let liveContexts = Atomic<Int>(0)
    /// Requests refused for their framing (`RequestFraming`) since start.
    let framingRefusals = Atomic<Int>(0)
    /// Bytes of queued answers their clients have not taken yet (`maxHeldAnswerBytes`).
    let heldAnswerBytes = Atomic<Int>(0)
    /// Answers replaced by 503 `answers_over_budget` since start.
    let answersOverBudget = Atomic<Int>(0)
    let registry = Locked(Registry())
    private let drained = DispatchSemaphore(value: 0)
    let startupMessages = Locked<[String]?>(nil)
    /// Where the C logger trampoline forwards (`runloopd_mhd_logger`); freed in `deinit`.
    // nonisolated(unsafe): written once in init, read by the C trampoline, freed in deinit.
    nonisolated(unsafe) let loggerSink: UnsafeMutablePointer<runloopd_mhd_logger>

    init(configuration: HTTPServerConfiguration, handler: any HTTPRequestHandler, logger: Logger) {
        self.configuration = configuration
        self.handler = handler
        self.logger = logger
        deadlines = RequestDeadlines(
            seconds: configuration.requestDeadline, cap: configuration.maxPendingRequests,
            connectionLimit: configuration.connectionLimit, headroom: configuration.connectionHeadroom)
        loggerSink = .allocate(capacity: 1)
        loggerSink.initialize(to: runloopd_mhd_logger(fn: Self.logCallback, cls: nil))
        loggerSink.pointee.cls = Unmanaged.passUnretained(self).toOpaque()
    }

    deinit {
        loggerSink.deinitialize(count: 1)
        loggerSink.deallocate()
    }

    /// Most body bytes drained past the limit before the connection is closed.
    private var drainLimit: Int {
        let limit = configuration.maxBodyBytes
        return max(1 << 20, limit > Int.max / 4 ? Int.max : limit * 4)
    }

    /// Request contexts not yet released (for leak checks in tests).
    var liveRequestCount: Int { liveContexts.load(ordering: .relaxed) }

    /// Event streams currently attached to a connection.
    var liveStreamCount: Int { registry.withLock { $0.streams.count } }

    // MARK: - Start and stop support

    /// Starts collecting libmicrohttpd's messages (to explain a failed start).
    func beginStartup() {
        startupMessages.withLock { $0 = [] }
    }

    /// Stops collecting and returns what libmicrohttpd said during start.
    func endStartup() -> [String] {
        startupMessages.withLock { messages in
            let collected = messages ?? []
            messages = nil
            return collected
        }
    }

    /// Refuses new work and returns every request still waiting for an answer
    /// (or being answered) and every attached stream.
    func beginStopping() -> (contexts: [HTTPRequestContext], streams: [EventStream]) {
        registry.withLock { r in
            r.stopping = true
            return (Array(r.outstanding.values), Array(r.streams.values))
        }
    }

    /// Waits until every outstanding request has completed and every stream has
    /// detached, or until `deadline`. Returns whether everything drained.
    func waitUntilDrained(deadline: DispatchTime) -> Bool {
        while true {
            let empty = registry.withLock { $0.outstanding.isEmpty && $0.streams.isEmpty }
            if empty { return true }
            if drained.wait(timeout: deadline) == .timedOut {
                return registry.withLock { $0.outstanding.isEmpty && $0.streams.isEmpty }
            }
        }
    }

    /// Answers `context` with `response` unless it already has an answer;
    /// resumes the connection when it was suspended (at the end of the batch
    /// when the calling thread is inside `withBatchedResumes`).
    func deliver(_ response: HTTPResponse, to context: HTTPRequestContext) {
        LockCheck.assertNoneHeld("an HTTP answer (it resumes a connection)")
        switch context.transition(.deliver(response)) {
        case .resume(let resume):
            if let batch = ResumeBatch.current {
                batch.connections.append(resume.pointer)
            } else {
                MHD_resume_connection(resume.pointer)
            }
        case .ignored:
            logger.debug("HTTP answer ignored: the request was already answered or has ended")
        default:
            break
        }
    }

    /// Runs `body`; connections its answers resume are resumed together when it
    /// returns, so libmicrohttpd's thread wakes once and finds them all.
    func withBatchedResumes<Result>(_ body: () throws -> Result) rethrows -> Result {
        if ResumeBatch.current != nil { return try body() }
        let batch = ResumeBatch()
        ResumeBatch.current = batch
        defer {
            ResumeBatch.current = nil
            for connection in batch.connections { MHD_resume_connection(connection) }
        }
        return try body()
    }

    // MARK: - Access handler

    func access(
        connection: OpaquePointer, url: UnsafePointer<CChar>?, method: UnsafePointer<CChar>?,
        version: UnsafePointer<CChar>?, uploadData: UnsafePointer<CChar>?, uploadDataSize: UnsafeMutablePointer<Int>,
        contextSlot: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    ) -> MHD_Result {
        guard let raw = contextSlot.pointee else {
            return firstCall(connection: connection, version: version, contextSlot: contextSlot)
        }
        let context = HTTPRequestContext(unretained: raw)
        if uploadDataSize.pointee > 0 {
            return collect(uploadData, uploadDataSize, into: context)
        }
        switch context.transition(.access) {
        case .handle(let body, let headers, let headerCount):
            let cutQuery = deadlines.received(connection)
            if let refusal = layerRefusal(cutQuery: Int(cutQuery), headerCount: headerCount) {
                _ = context.transition(.refused)
                return queue(refusal, on: connection, for: context)
            }
            return dispatch(
                context: context, connection: connection, url: url, method: method, headers: headers, body: body)
        case .refuseTooLarge:
            deadlines.received(connection)
            return queue(payloadTooLarge(), on: connection, for: context)
        case .queue(let response):
            return queue(response, on: connection, for: context)
        default:
            return .YES
        }
    }

    /// A body chunk. MHD refuses a response queued mid-body, so a chunked body
    /// over the limit is drained (and dropped) and answered 413 at its end; one
    /// that goes on far past the limit gets its connection closed instead.
    private func collect(
        _ uploadData: UnsafePointer<CChar>?, _ uploadDataSize: UnsafeMutablePointer<Int>,
        into context: HTTPRequestContext
    ) -> MHD_Result {
        let count = uploadDataSize.pointee
        uploadDataSize.pointee = 0
        guard let uploadData else { return .YES }
        let chunk = UnsafeRawBufferPointer(start: uploadData, count: count)
        if case .dropped(let discarded) = context.transition(.chunk(chunk, limit: configuration.maxBodyBytes)),
            discarded > drainLimit
        {
            logger.debug("HTTP body far over the limit: closing the connection")
            return .NO
        }
        return .YES
    }

    /// The layer's own refusal of a whole request: too many query parameters
    /// (cut by the URI callback) or header fields. Nil for the usual request.
    private func layerRefusal(cutQuery: Int, headerCount: Int) -> HTTPResponse? {
        if cutQuery > 0 {
            return refusal(
                414, .tooManyParameters,
                "the query has \(cutQuery) parameters; at most \(configuration.maxQueryParameters) are read")
        }
        if headerCount > configuration.maxHeaders {
            return refusal(
                431, .tooManyHeaders,
                "the request has \(headerCount) header fields; at most \(configuration.maxHeaders) are read")
        }
        return nil
    }

    private func firstCall(
        connection: OpaquePointer, version: UnsafePointer<CChar>?,
        contextSlot: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    ) -> MHD_Result {
        let peer = runloopd_mhd_client_address(connection).flatMap(SocketAddress.peer)
        // The head, read once: its fields wait in the context for the handler.
        let head = RequestHead.read(connection)
        let context = HTTPRequestContext(
            connection: MHDConnection(pointer: connection), peer: peer, headers: head.headers, headerCount: head.count)
        contextSlot.pointee = context.retained()
        liveContexts.add(1, ordering: .relaxed)

        // RFC 9112's framing rules, before a byte of the body is read.
        let isHTTP11 = version.map { strcmp($0, "HTTP/1.1") == 0 } ?? false
        if let bad = head.framing.check(isHTTP11: isHTTP11) {
            _ = context.transition(.refused)
            deadlines.received(connection)
            framingRefusals.add(1, ordering: .relaxed)
            return queue(refusal(400, bad.code, bad.message), on: connection, for: context)
        }

        if let length = head.framing.declaredLength, length > configuration.maxBodyBytes {
            _ = context.transition(.refusedTooLarge)
            deadlines.received(connection)
            return queue(payloadTooLarge(), on: connection, for: context)
        }
        return .YES
    }

    private func payloadTooLarge() -> HTTPResponse {
        handler.response(
            for: HTTPRefusal(
                status: 413, code: .payloadTooLarge,
                message: "request body exceeds \(configuration.maxBodyBytes) bytes",
                headers: [("Connection", "close")]))
    }

    /// A refusal of the HTTP layer's own, closing the connection.
    private func refusal(_ status: Int, _ code: ErrorCode, _ message: String) -> HTTPResponse {
        handler.response(
            for: HTTPRefusal(status: status, code: code, message: message, headers: [("Connection", "close")]))
    }

    private func dispatch(
        context: HTTPRequestContext, connection: OpaquePointer, url: UnsafePointer<CChar>?,
        method: UnsafePointer<CChar>?, headers: HTTPHeaders, body: [UInt8]
    ) -> MHD_Result {
        var request = HTTPRequest(
            id: nextRequestID.add(1, ordering: .relaxed).newValue,
            method: method.map { String(cString: $0) } ?? "GET",
            path: url.map { String(cString: $0) } ?? "/",
            query: Self.queryArguments(connection), headers: headers, body: body)
        request.peer = context.peer
        let accepted = registry.withLock { r in
            if r.stopping { return false }
            r.outstanding[context.id] = context
            return true
        }
        guard accepted else {
            _ = context.transition(.refused)
            return queue(shuttingDown(), on: connection, for: context)
        }
        // Weak: a handler that keeps `respond` around must not keep the server alive.
        handler.handle(request) { [weak self] response in
            self?.deliver(response, to: context)
        }
        switch context.transition(.handlerReturned) {
        case .queue(let response):
            return queue(response, on: connection, for: context)
        default:
            MHD_suspend_connection(connection)
            if case .resume = context.transition(.suspended) {
                MHD_resume_connection(connection)
            }
            return .YES
        }
    }

    /// The answer for requests cut short by `stop()`.
    func shuttingDown() -> HTTPResponse {
        handler.response(
            for: HTTPRefusal(
                status: 503, code: .shuttingDown, message: "the server is shutting down",
                headers: [("Connection", "close")]))
    }

    // MARK: - Request completed

    func completed(_ context: HTTPRequestContext, code: MHD_RequestTerminationCode) {
        if case .uncharge(let bytes) = context.transition(.finished) {
            heldAnswerBytes.subtract(bytes, ordering: .relaxed)
        }
        liveContexts.subtract(1, ordering: .relaxed)
        if code != .REQUEST_TERMINATED_COMPLETED_OK {
            logger.debug("HTTP request ended early", metadata: ["reason": "\(code.rawValue)"])
        }
        let signal = registry.withLock { r in
            r.outstanding.removeValue(forKey: context.id)
            return r.stopping
        }
        if signal { drained.signal() }
    }

    func streamDetached(_ key: ObjectIdentifier) {
        let signal = registry.withLock { r in
            r.streams.removeValue(forKey: key)
            return r.stopping
        }
        if signal { drained.signal() }
    }
}
