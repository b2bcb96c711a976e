import Primitives
import CMicroHTTPD
import Dispatch

/// A Server-Sent Events stream to one client: a bounded buffer of frames that
/// libmicrohttpd drains as chunked output.
///
/// Hand it to the server in `HTTPResponse(status: 200, stream: stream)` and call
/// `send` from any thread. `send` never blocks: when the client reads too slowly
/// for the buffer to hold what is sent, the stream closes (`isClosed` becomes
/// true and the `onClose` handlers run with `.clientTooSlow`). While the stream
/// is attached, the server writes a `: ping` comment every heartbeat interval so
/// that a vanished client is noticed. A stream with nothing buffered when it
/// is attached starts with an `: open` comment, so that the response header
/// goes out at once.
public final class EventStream: Sendable {
    /// Why a stream ended.
    public enum CloseReason: Sendable, Equatable {
        /// `close()` was called.
        case closed
        /// The client did not read fast enough and the buffer would have overflowed.
        case clientTooSlow
        /// The client went away (or the connection failed).
        case clientDisconnected
        /// The server is stopping.
        case serverStopping
    }

    /// What the libmicrohttpd reader is doing.
    private enum ReaderState {
        /// Not attached yet, or writing.
        case running
        /// About to suspend (between deciding and `MHD_suspend_connection`).
        case suspending
        /// The connection is suspended; whoever adds data resumes it.
        case suspended
    }

    /// A heartbeat timer; DispatchSource objects are thread-safe.
    // @unchecked: DispatchSource timers are thread-safe but not marked Sendable.
    private struct Heartbeat: @unchecked Sendable {
        let timer: any DispatchSourceTimer
    }

    private struct State: Sendable {
        var buffer: [UInt8] = []
        var readOffset = 0
        var capacity: Int
        var closeReason: CloseReason?
        var handlers: [@Sendable (CloseReason) -> Void] = []
        var connection: MHDConnection?
        var reader: ReaderState = .running
        var attached = false
        var heartbeat: Heartbeat?
        var onDetach: (@Sendable () -> Void)?

        var pending: Int { buffer.count - readOffset }
    }

    private let explicitCapacity: Int?
    private let state: Locked<State>

    /// Creates an unattached stream.
    ///
    /// - Parameter bufferBytes: The most bytes held for a slow client; `nil` uses
    ///   the server's `sseBufferBytes` once the stream is attached (and
    ///   `HTTPServerConfiguration.defaultSSEBufferBytes` before that).
    public init(bufferBytes: Int? = nil) {
        explicitCapacity = bufferBytes.map { max(1, $0) }
        state = Locked(State(capacity: bufferBytes ?? HTTPServerConfiguration.defaultSSEBufferBytes))
    }

    /// Whether the stream has ended; further sends are dropped.
    public var isClosed: Bool { state.withLock { $0.closeReason != nil } }

    /// Why the stream ended, or `nil` while it is open.
    public var closeReason: CloseReason? { state.withLock { $0.closeReason } }

    /// Bytes sent but not yet handed to the connection.
    public var bufferedBytes: Int { state.withLock { $0.pending } }

    /// The bytes queued and not yet read (tests read what a client would get).
    var bufferedText: [UInt8] { state.withLock { Array($0.buffer[$0.readOffset...]) } }

    /// Registers a handler that runs once when the stream ends (at once if it
    /// already has). It runs on the thread that ends the stream and must not block.
    public func onClose(_ handler: @escaping @Sendable (CloseReason) -> Void) {
        let reason: CloseReason? = state.withLock { s in
            if s.closeReason == nil { s.handlers.append(handler) }
            return s.closeReason
        }
        if let reason { Self.run([handler], reason) }
    }

    /// Queues one event frame (`event:`, `id:`, one `data:` line per line of `data`).
    ///
    /// - Returns: `false` when the stream is closed, or closes now because the
    ///   client is too slow.
    @discardableResult
    public func send(event: String, data: String, id: UInt64? = nil) -> Bool {
        enqueue(Self.frame(event: event, data: data, id: id))
    }

    /// Queues an SSE comment line (`: text`), which clients ignore.
    @discardableResult
    public func sendComment(_ text: String) -> Bool {
        enqueue(Array(": \(Self.singleLine(text))\n\n".utf8))
    }

    /// Ends the stream: what is buffered is still delivered, then the response ends.
    public func close() {
        finish(.closed)
    }

    // MARK: - Frames

    /// Built from bytes: CR, LF and CRLF are single bytes in UTF-8 (never
    /// inside a multi-byte character), so each ends a `data:` line without
    /// decoding the text (a summary snapshot is a megabyte of JSON).
    static func frame(event: String, data: String, id: UInt64?) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(data.utf8.count + event.utf8.count + 32)
        let name = singleLine(event)
        if !name.isEmpty { bytes += Array("event: \(name)\n".utf8) }
        if let id { bytes += Array("id: \(id)\n".utf8) }
        let prefix = Array("data: ".utf8)
        bytes += prefix
        let cr = UInt8(ascii: "\r")
        let lf = UInt8(ascii: "\n")
        if !data.utf8.contains(where: { $0 == cr || $0 == lf }) {
            bytes += data.utf8
        } else {
            var previousCR = false
            for byte in data.utf8 {
                if byte == lf && previousCR {
                    previousCR = false
                    continue
                }
                previousCR = byte == cr
                if byte == cr || byte == lf {
                    bytes.append(lf)
                    bytes += prefix
                } else {
                    bytes.append(byte)
                }
            }
        }
        bytes += [lf, lf]
        return bytes
    }

    private static func singleLine(_ s: String) -> String {
        String(s.unicodeScalars.filter { $0 != "\n" && $0 != "\r" })
    }

    // MARK: - Producer side

    private func enqueue(_ bytes: [UInt8]) -> Bool {
        var resume: MHDConnection?
        var fire: (handlers: [@Sendable (CloseReason) -> Void], reason: CloseReason)?
        let accepted: Bool = state.withLock { s in
            guard s.closeReason == nil else { return false }
            if s.pending + bytes.count > s.capacity {
                fire = close(&s, reason: .clientTooSlow)
                resume = takeSuspendedConnection(&s)
                return false
            }
            if s.readOffset > 0 && s.readOffset >= s.buffer.count / 2 {
                s.buffer.removeFirst(s.readOffset)
                s.readOffset = 0
            }
            s.buffer.append(contentsOf: bytes)
            resume = takeSuspendedConnection(&s)
            return true
        }
        if let resume { MHD_resume_connection(resume.pointer) }
        if let fire { Self.run(fire.handlers, fire.reason) }
        return accepted
    }

    /// Closes with `reason` unless already closed; runs the handlers outside the lock.
    func finish(_ reason: CloseReason) {
        var resume: MHDConnection?
        var fire: (handlers: [@Sendable (CloseReason) -> Void], reason: CloseReason)?
        state.withLock { s in
            fire = close(&s, reason: reason)
            resume = takeSuspendedConnection(&s)
        }
        if let resume { MHD_resume_connection(resume.pointer) }
        if let fire { Self.run(fire.handlers, fire.reason) }
    }

    /// Runs close handlers: foreign code, so never under a lock (debug builds stop when it is).
    private static func run(_ handlers: [@Sendable (CloseReason) -> Void], _ reason: CloseReason) {
        LockCheck.assertNoneHeld("EventStream close handlers")
        for handler in handlers { handler(reason) }
    }

    private func close(
        _ s: inout State, reason: CloseReason
    ) -> (handlers: [@Sendable (CloseReason) -> Void], reason: CloseReason)? {
        guard s.closeReason == nil else { return nil }
        s.closeReason = reason
        s.heartbeat?.timer.cancel()
        s.heartbeat = nil
        if reason != .closed && reason != .serverStopping {
            s.buffer = []
            s.readOffset = 0
        }
        let handlers = s.handlers
        s.handlers = []
        return (handlers, reason)
    }

    private func takeSuspendedConnection(_ s: inout State) -> MHDConnection? {
        guard s.reader == .suspended, let connection = s.connection else { return nil }
        s.reader = .running
        return connection
    }

    // MARK: - Server side

    /// Binds the stream to the connection it is written to and starts heartbeats.
    ///
    /// - Returns: `false` when the stream is already attached to a response.
    func attach(
        connection: MHDConnection, defaultCapacity: Int, heartbeat: Double, onDetach: @escaping @Sendable () -> Void
    ) -> Bool {
        state.withLock { s in
            guard !s.attached else { return false }
            s.attached = true
            s.connection = connection
            s.onDetach = onDetach
            if explicitCapacity == nil { s.capacity = max(1, defaultCapacity) }
            // libmicrohttpd sends the header with the first chunk: give it one at once,
            // so that clients see the stream open (EventSource `onopen`) before any event.
            if s.pending == 0 && s.closeReason == nil {
                s.buffer.append(contentsOf: Self.openingComment)
            }
            if s.closeReason == nil && heartbeat > 0 && heartbeat.isFinite {
                let timer = DispatchSource.makeTimerSource(queue: Self.heartbeatQueue)
                let interval = DispatchTimeInterval.nanoseconds(Int(min(heartbeat, 86_400) * 1e9))
                timer.schedule(deadline: .now() + interval, repeating: interval, leeway: .milliseconds(10))
                timer.setEventHandler { [weak self] in
                    self?.sendComment("ping")
                }
                timer.resume()
                s.heartbeat = Heartbeat(timer: timer)
            }
            return true
        }
    }

    /// The response is gone (sent to its end, or the connection closed).
    func detach() {
        let onDetach: (@Sendable () -> Void)? = state.withLock { s in
            s.connection = nil
            s.reader = .running
            let callback = s.onDetach
            s.onDetach = nil
            return callback
        }
        finish(.clientDisconnected)
        onDetach?()
    }

    /// libmicrohttpd's content reader: copies buffered bytes into `buffer`, or
    /// suspends the connection and returns 0 when there is nothing to send.
    func read(into buffer: UnsafeMutablePointer<CChar>, max: Int) -> Int {
        enum Step {
            case copied(Int)
            case end
            case error
            case suspend(MHDConnection)
        }
        let step: Step = state.withLock { s in
            if s.pending > 0 {
                let count = min(max, s.pending)
                s.buffer.withUnsafeBytes { raw in
                    guard let base = raw.baseAddress else { return }
                    UnsafeMutableRawPointer(buffer).copyMemory(from: base + s.readOffset, byteCount: count)
                }
                s.readOffset += count
                if s.readOffset == s.buffer.count {
                    s.buffer.removeAll(keepingCapacity: s.buffer.capacity <= 64 * 1024)
                    s.readOffset = 0
                }
                return .copied(count)
            }
            if let reason = s.closeReason {
                return reason == .closed || reason == .serverStopping ? .end : .error
            }
            guard let connection = s.connection else { return .error }
            s.reader = .suspending
            return .suspend(connection)
        }
        switch step {
        case .copied(let count): return count
        case .end: return runloopd_mhd_reader_end_of_stream
        case .error: return runloopd_mhd_reader_end_with_error
        case .suspend(let connection):
            MHD_suspend_connection(connection.pointer)
            let resumeNow = state.withLock { s in
                if s.pending > 0 || s.closeReason != nil {
                    s.reader = .running
                    return true
                }
                s.reader = .suspended
                return false
            }
            if resumeNow { MHD_resume_connection(connection.pointer) }
            return 0
        }
    }

    private static let openingComment = Array(": open\n\n".utf8)

    private static let heartbeatQueue = DispatchQueue(label: "runloopd.http.sse-heartbeat")
}
