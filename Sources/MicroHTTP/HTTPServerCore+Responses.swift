import Primitives
import CMicroHTTPD
import Dispatch
import Logging
import Synchronization

/// Turning `HTTPResponse` values into libmicrohttpd responses, and reading a
/// connection's headers and query. Called on libmicrohttpd's threads.
extension HTTPServerCore {
    // MARK: - Responses

    /// Queues `response` on `connection`. An answer over
    /// `alwaysAdmittedAnswerBytes` is charged to the held-answer budget for
    /// `context` (given back when the request ends: its client took it, or
    /// the connection closed); one that would pass the budget is replaced by
    /// 503 `answers_over_budget`, so clients that do not read can hold at most
    /// `maxHeldAnswerBytes` of answers, whatever their number.
    func queue(_ response: HTTPResponse, on connection: OpaquePointer, for context: HTTPRequestContext?) -> MHD_Result {
        let made: OpaquePointer?
        var headers = response.headers
        if let stream = response.stream {
            made = makeStreamResponse(stream, connection: connection)
            if made == nil {
                return queue(
                    handler.response(
                        for: HTTPRefusal(
                            status: 500, code: .`internal`, message: "event stream is already attached to a response")),
                    on: connection, for: nil)
            }
            Self.addStreamDefaults(&headers)
        } else {
            let size = response.body.count
            if let context, size > HTTPServerConfiguration.alwaysAdmittedAnswerBytes {
                guard chargeAnswer(size) else {
                    answersOverBudget.add(1, ordering: .relaxed)
                    return queue(answerOverBudget(size), on: connection, for: nil)
                }
                _ = context.transition(.charged(size))
            }
            made = response.body.withUnsafeBytes { bytes in
                MHD_create_response_from_buffer(
                    bytes.count, UnsafeMutableRawPointer(mutating: bytes.baseAddress), .RESPMEM_MUST_COPY)
            }
        }
        guard let mhdResponse = made else {
            logger.error("libmicrohttpd could not create a response")
            return .NO
        }
        defer { MHD_destroy_response(mhdResponse) }
        add(headers, to: mhdResponse)
        let status = (100...999).contains(response.status) ? UInt32(response.status) : 500
        return MHD_queue_response(connection, status, mhdResponse)
    }

    /// Takes `bytes` of the held-answer budget; false when they do not fit.
    private func chargeAnswer(_ bytes: Int) -> Bool {
        var current = heldAnswerBytes.load(ordering: .relaxed)
        while current + bytes <= configuration.maxHeldAnswerBytes {
            let (exchanged, original) = heldAnswerBytes.compareExchange(
                expected: current, desired: current + bytes, ordering: .relaxed)
            if exchanged { return true }
            current = original
        }
        return false
    }

    private func answerOverBudget(_ bytes: Int) -> HTTPResponse {
        handler.response(
            for: HTTPRefusal(
                status: 503, code: .answersOverBudget,
                message:
                    "an answer of \(bytes) bytes would pass the \(configuration.maxHeldAnswerBytes) bytes of answers "
                    + "that clients have not taken yet (--max-held-answer-bytes); retry later",
                headers: [("Retry-After", "1")]))
    }

    /// An event stream's Content-Type and Cache-Control unless the handler set them.
    private static func addStreamDefaults(_ headers: inout [(String, String)]) {
        if !headers.contains(where: { $0.0.equalsASCIIIgnoringCase("content-type") }) {
            headers.append(("Content-Type", "text/event-stream"))
        }
        if !headers.contains(where: { $0.0.equalsASCIIIgnoringCase("cache-control") }) {
            headers.append(("Cache-Control", "no-store"))
        }
    }

    /// The header lines, but the framing ones libmicrohttpd writes itself.
    private func add(_ headers: [(String, String)], to mhdResponse: OpaquePointer) {
        for (name, value) in headers {
            if name.equalsASCIIIgnoringCase("content-length") || name.equalsASCIIIgnoringCase("transfer-encoding") {
                continue
            }
            // withCString: a short name or value is passed from the stack, not copied to the heap.
            let added = name.withCString { name in
                value.withCString { value in MHD_add_response_header(mhdResponse, name, value) }
            }
            if added != .YES {
                logger.warning("HTTP response header refused", metadata: ["header": "\(name)"])
            }
        }
    }

    func makeStreamResponse(_ stream: EventStream, connection: OpaquePointer) -> OpaquePointer? {
        let registered = registry.withLock { r in
            if r.stopping { return false }
            r.streams[ObjectIdentifier(stream)] = stream
            return true
        }
        // Its client's hang-up ends it at once (the suspended connection is watched by nobody else).
        let watch = hangups.watch(stream, fd: runloopd_mhd_connection_fd(connection))
        let attached = stream.attach(
            connection: MHDConnection(pointer: connection),
            defaultCapacity: configuration.sseBufferBytes,
            heartbeat: configuration.sseHeartbeat
        ) { [weak self, key = ObjectIdentifier(stream)] in
            if let watch { self?.hangups.forget(watch) }
            self?.streamDetached(key)
        }
        guard attached else {
            if let watch { hangups.forget(watch) }
            if registered { registry.withLock { _ = $0.streams.removeValue(forKey: ObjectIdentifier(stream)) } }
            return nil
        }
        if !registered { stream.finish(.serverStopping) }
        let cls = Unmanaged.passRetained(stream).toOpaque()
        let response = MHD_create_response_from_callback(
            runloopd_mhd_size_unknown, 16 * 1024, Self.streamReader, cls, Self.streamFree)
        if response == nil {
            Unmanaged<EventStream>.fromOpaque(cls).release()
            stream.detach()
        }
        return response
    }

    // MARK: - Header and argument collection

    /// Carries the visiting closure through libmicrohttpd's `void *` argument.
    private final class Visitor {
        let visit: (String, String) -> Void
        init(_ visit: @escaping (String, String) -> Void) { self.visit = visit }
    }

    /// Calls `visit` with each (name, value) of `kind`, in arrival order,
    /// straight from libmicrohttpd's iterator (no list in between).
    private static func forEachValue(
        _ connection: OpaquePointer, kind: MHD_ValueKind, _ visit: (String, String) -> Void
    ) {
        // Counting first (no iterator) spares the visitor for the common empty query.
        guard MHD_get_connection_values(connection, kind, nil, nil) > 0 else { return }
        withoutActuallyEscaping(visit) { visit in
            let visitor = Visitor(visit)
            withExtendedLifetime(visitor) {
                _ = MHD_get_connection_values(
                    connection, kind,
                    { cls, _, key, value in
                        guard let cls, let key else { return .YES }
                        Unmanaged<Visitor>.fromOpaque(cls).takeUnretainedValue().visit(
                            String(cString: key), value.map { String(cString: $0) } ?? "")
                        return .YES
                    }, Unmanaged.passUnretained(visitor).toOpaque())
            }
        }
    }

    static func queryArguments(_ connection: OpaquePointer) -> [String: String] {
        var query: [String: String] = [:]
        forEachValue(connection, kind: .GET_ARGUMENT_KIND) { rawKey, rawValue in
            let key = PercentDecoding.decode(rawKey, plusIsSpace: true) ?? rawKey
            if query[key] == nil {
                query[key] = PercentDecoding.decode(rawValue, plusIsSpace: true) ?? rawValue
            }
        }
        return query
    }
}

extension String {
    /// Whether the string equals `lowercase` (all lower-case ASCII) ignoring
    /// ASCII case, without allocating.
    func equalsASCIIIgnoringCase(_ lowercase: StaticString) -> Bool {
        let other = UnsafeBufferPointer(start: lowercase.utf8Start, count: lowercase.utf8CodeUnitCount)
        guard utf8.count == other.count else { return false }
        for (byte, expected) in zip(utf8, other) {
            let folded = (0x41...0x5A).contains(byte) ? byte | 0x20 : byte
            if folded != expected { return false }
        }
        return true
    }

    /// The string without leading and trailing spaces, tabs and line breaks.
    func trimmingSpaces() -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) })
        else { return "" }
        return String(self[first...last])
    }
}
