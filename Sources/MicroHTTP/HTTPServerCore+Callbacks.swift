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

/// libmicrohttpd's C callbacks: each finds the core (or the context) from its
/// unretained `cls` and calls into Swift.
extension HTTPServerCore {
    /// `MHD_AccessHandlerCallback`; `cls` is the unretained core.
    static let accessHandler: MHD_AccessHandlerCallback = {
        cls, connection, url, method, version, uploadData, uploadDataSize, contextSlot in
        guard let cls, let connection, let uploadDataSize, let contextSlot else { return .NO }
        let core = Unmanaged<HTTPServerCore>.fromOpaque(cls).takeUnretainedValue()
        return core.access(
            connection: connection, url: url, method: method, version: version, uploadData: uploadData,
            uploadDataSize: uploadDataSize, contextSlot: contextSlot)
    }

    /// `MHD_RequestCompletedCallback`: releases the per-request context.
    /// A whole answer starts the kept-alive connection's clock for its next request.
    static let requestCompleted: MHD_RequestCompletedCallback = { cls, connection, contextSlot, code in
        guard let cls, let contextSlot else { return }
        let core = Unmanaged<HTTPServerCore>.fromOpaque(cls).takeUnretainedValue()
        if let connection, code == .REQUEST_TERMINATED_COMPLETED_OK { core.deadlines.answered(connection) }
        guard let raw = contextSlot.pointee else { return }
        contextSlot.pointee = nil
        let context = HTTPRequestContext.released(raw)
        core.completed(context, code: code)
    }

    /// `MHD_NotifyConnectionCallback`: a connection's start and end, for the request deadline.
    static let notifyConnection: MHD_NotifyConnectionCallback = { cls, connection, _, code in
        guard let cls, let connection else { return }
        let core = Unmanaged<HTTPServerCore>.fromOpaque(cls).takeUnretainedValue()
        switch code {
        case .CONNECTION_NOTIFY_STARTED:
            core.deadlines.started(
                connection, fd: runloopd_mhd_connection_fd(connection),
                address: RequestDeadlines.AddressKey(runloopd_mhd_client_address(connection)))
        default:
            core.deadlines.closed(connection)
        }
    }

    /// `MHD_OPTION_URI_LOG_CALLBACK`: a request line was read. Cuts off a query
    /// with too many parameters before libmicrohttpd parses it (1,000 of them
    /// exhausted its memory pool and the request was never answered); the
    /// request is then refused 414.
    static let uriLog: runloopd_mhd_uri_log_fn = { cls, uri, connection in
        guard let cls, let connection else { return nil }
        let core = Unmanaged<HTTPServerCore>.fromOpaque(cls).takeUnretainedValue()
        let limit = UInt32(clamping: core.configuration.maxQueryParameters)
        let count = runloopd_mhd_cut_long_query(uri, limit)
        core.deadlines.requestLine(
            connection, fd: runloopd_mhd_connection_fd(connection), cutQuery: count > limit ? count : 0)
        return nil
    }

    /// `MHD_ContentReaderCallback` for event streams.
    static let streamReader: MHD_ContentReaderCallback = { cls, _, buffer, max in
        guard let cls, let buffer else { return runloopd_mhd_reader_end_with_error }
        return Unmanaged<EventStream>.fromOpaque(cls).takeUnretainedValue().read(into: buffer, max: max)
    }

    /// `MHD_ContentReaderFreeCallback` for event streams: drops the response's retain.
    static let streamFree: MHD_ContentReaderFreeCallback = { cls in
        guard let cls else { return }
        Unmanaged<EventStream>.fromOpaque(cls).takeRetainedValue().detach()
    }

    /// Receives libmicrohttpd's formatted messages (via the shim's trampoline).
    static let logCallback: runloopd_mhd_log_fn = { cls, message in
        guard let cls, let message else { return }
        let core = Unmanaged<HTTPServerCore>.fromOpaque(cls).takeUnretainedValue()
        core.log(String(cString: message).trimmingSpaces())
    }

    /// libmicrohttpd's message with the port it could not bind named: runloopd
    /// passes the whole address (`MHD_OPTION_SOCK_ADDR`) and 0 as libmicrohttpd's
    /// own port argument, so its "Failed to bind to port 0" means `port`.
    static func naming(port: UInt16, in message: String) -> String {
        guard port != 0 else { return message }
        return message.replacing("to port 0:", with: "to port \(port):").replacing(
            "to port 0.", with: "to port \(port).")
    }

    private func log(_ raw: String) {
        let message = Self.naming(port: configuration.port, in: raw)
        let collecting = startupMessages.withLock { messages in
            if messages == nil { return false }
            messages?.append(message)
            return true
        }
        if collecting {
            logger.warning("libmicrohttpd: \(message)")
        } else {
            logger.debug("libmicrohttpd: \(message)")
        }
    }
}
