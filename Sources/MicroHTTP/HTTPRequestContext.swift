import Primitives
import CMicroHTTPD

/// A libmicrohttpd connection pointer that may cross threads.
///
/// Only `MHD_resume_connection` is ever called on it from a foreign thread, and
/// only while the connection is known to be suspended (so it is alive).
// @unchecked: only MHD_resume_connection, on a suspended (live) connection, leaves its thread.
struct MHDConnection: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// Per-request state kept in libmicrohttpd's `*con_cls` (one retain, released
/// by the request-completed callback).
///
/// The reading half is touched only by the connection's libmicrohttpd thread;
/// the answer half is shared with whoever calls `respond`, so both sit behind
/// one lock.
final class HTTPRequestContext: Sendable {
    /// Where the request is in its life.
    enum Phase {
        /// Headers and body are still arriving.
        case reading
        /// `handler.handle` is running on the libmicrohttpd thread.
        case handling
        /// `handle` returned without an answer; the connection is being suspended.
        case suspending
        /// The connection is suspended, waiting for `respond`.
        case suspended
        /// `respond` resumed the connection; the next access call queues the answer.
        case resumed
        /// A response was queued.
        case answered
        /// libmicrohttpd finished with the request; nothing may touch the connection.
        case finished
    }

    /// What the libmicrohttpd thread does once `handle` has returned.
    enum AfterHandle {
        /// `respond` was called inside `handle`: queue this at once.
        case respondNow(HTTPResponse)
        /// Suspend the connection until `respond` is called.
        case suspend
    }

    /// Body reading state.
    struct Body {
        var bytes: [UInt8] = []
        var tooLarge = false
        var discarded = 0
    }

    /// Both halves behind one lock (one allocation per request, not two).
    private struct State {
        var phase: Phase = .reading
        var pending: HTTPResponse?
        var responded = false
        var body = Body()
    }

    let connection: MHDConnection
    let peer: PeerAddress?
    private let state = Locked(State())

    init(connection: MHDConnection, peer: PeerAddress?) {
        self.connection = connection
        self.peer = peer
    }

    // MARK: Reading (libmicrohttpd thread)

    /// Adds a body chunk, or drops it once the body has passed `limit`.
    /// Returns how many bytes have been dropped so far (0 while within the limit).
    func appendBody(_ chunk: UnsafeRawBufferPointer, limit: Int) -> Int {
        state.withLock { s in
            if !s.body.tooLarge && s.body.bytes.count + chunk.count > limit {
                s.body.tooLarge = true
                s.body.discarded = s.body.bytes.count
                s.body.bytes = []
            }
            if s.body.tooLarge {
                s.body.discarded += chunk.count
                return s.body.discarded
            }
            s.body.bytes.append(contentsOf: chunk)
            return 0
        }
    }

    /// Marks the body as too large without reading it (Content-Length said so).
    func markBodyTooLarge() {
        state.withLock { $0.body.tooLarge = true }
    }

    /// Whether the body went over the limit.
    var bodyTooLarge: Bool { state.withLock { $0.body.tooLarge } }

    /// Takes the collected body.
    func takeBody() -> [UInt8] {
        state.withLock { s in
            let bytes = s.body.bytes
            s.body.bytes = []
            return bytes
        }
    }

    // MARK: Answering

    /// The current phase.
    var phase: Phase { state.withLock { $0.phase } }

    /// Records that a response was queued directly (413, 503, …) without the handler.
    func markAnswered() {
        state.withLock { a in
            a.responded = true
            a.phase = .answered
        }
    }

    /// Enters `.handling` just before `handle` is called.
    func beginHandling() {
        state.withLock { $0.phase = .handling }
    }

    /// Called on the libmicrohttpd thread when `handle` returns.
    func afterHandle() -> AfterHandle {
        state.withLock { a in
            if let response = a.pending {
                a.pending = nil
                a.phase = .answered
                return .respondNow(response)
            }
            a.phase = .suspending
            return .suspend
        }
    }

    /// Called right after `MHD_suspend_connection`; `true` when an answer arrived
    /// meanwhile and the caller must resume the connection itself.
    func didSuspend() -> Bool {
        state.withLock { a in
            if a.pending != nil {
                a.phase = .resumed
                return true
            }
            a.phase = .suspended
            return false
        }
    }

    /// Takes the answer stored by `respond` after a resume, if any.
    func takeResumedResponse() -> HTTPResponse? {
        state.withLock { a in
            guard a.phase == .resumed, let response = a.pending else { return nil }
            a.pending = nil
            a.phase = .answered
            return response
        }
    }

    /// Stores the answer (any thread). Returns the connection to resume when it
    /// was suspended; `nil` otherwise. `accepted` is `false` for a second answer
    /// or one that came after the request ended.
    func deliver(_ response: HTTPResponse) -> (accepted: Bool, resume: MHDConnection?) {
        state.withLock { a in
            guard !a.responded, a.phase != .finished else { return (false, nil) }
            a.responded = true
            a.pending = response
            if a.phase == .suspended {
                a.phase = .resumed
                return (true, connection)
            }
            return (true, nil)
        }
    }

    /// libmicrohttpd is done with the request.
    func finish() {
        state.withLock { a in
            a.phase = .finished
            a.pending = nil
        }
    }
}
