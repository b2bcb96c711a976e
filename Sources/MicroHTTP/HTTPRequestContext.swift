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
/// by the request-completed callback): one state machine behind one lock,
/// moved only by `transition(_:)`, which answers what the caller does next.
/// The context's one object is its lock (a `LockedBuffer`: the state in its
/// header, the mutex in its tail), so a request makes no lock of its own.
///
/// The reading events come from the connection's libmicrohttpd thread; a
/// `deliver` from whoever answers (the control loop, a worker, a timer).
// @unchecked: the state, connection and peer included, is reached only
// under the storage's lock.
struct HTTPRequestContext: @unchecked Sendable {
    /// The one object: the state and its lock.
    final class Storage: LockedBuffer<HTTPRequestState> {}

    let storage: Storage

    init(connection: MHDConnection, peer: PeerAddress?, headers: HTTPHeaders = HTTPHeaders(), headerCount: Int = 0) {
        storage = Storage.make(
            HTTPRequestState(connection: connection, peer: peer, headers: headers, headerCount: headerCount))
    }

    private init(storage: Storage) { self.storage = storage }

    /// The context as `*con_cls`: retained once, until `released(_:)`.
    func retained() -> UnsafeMutableRawPointer { Unmanaged.passRetained(storage).toOpaque() }

    /// The context `*con_cls` holds, still retained there.
    init(unretained raw: UnsafeMutableRawPointer) {
        storage = Unmanaged<Storage>.fromOpaque(raw).takeUnretainedValue()
    }

    /// The context `*con_cls` held, its retain given back.
    static func released(_ raw: UnsafeMutableRawPointer) -> HTTPRequestContext {
        HTTPRequestContext(storage: Unmanaged<Storage>.fromOpaque(raw).takeRetainedValue())
    }

    /// The request's identity (the registry of outstanding requests' key).
    var id: ObjectIdentifier { ObjectIdentifier(storage) }

    /// Where the request is in its life.
    enum Phase {
        /// Headers and body are still arriving.
        case reading
        /// `handler.handle` is running on the libmicrohttpd thread.
        case handling
        /// `handle` returned without an answer; the connection is being suspended.
        case suspending
        /// The connection is suspended, waiting for an answer.
        case suspended
        /// An answer resumed the connection; the next access call queues it.
        case resumed
        /// A response was queued.
        case answered
        /// libmicrohttpd finished with the request; nothing may touch the connection.
        case finished
    }

    /// What happened to the request.
    enum Event {
        /// A chunk of the body arrived (dropped once the body passes `limit`).
        case chunk(UnsafeRawBufferPointer, limit: Int)
        /// The headers said the body is too large; the layer answers 413 at once.
        case refusedTooLarge
        /// An access call with no more body: the request is whole, or an
        /// answer may be waiting after a resume.
        case access
        /// The layer answered the request itself (414, 431, 503 while stopping).
        case refused
        /// `handler.handle` returned.
        case handlerReturned
        /// `MHD_suspend_connection` returned.
        case suspended
        /// An answer (any thread).
        case deliver(HTTPResponse)
        /// Its answer was queued holding this many bytes of the held-answer budget.
        case charged(Int)
        /// libmicrohttpd is done with the request.
        case finished
    }

    /// What the caller does after a transition.
    enum Action {
        /// Nothing (a spurious access call, a stored answer, a finished request).
        case none
        /// The body is over its limit: this many bytes were dropped so far.
        case dropped(Int)
        /// The whole request arrived with a body over the limit: answer 413.
        case refuseTooLarge
        /// The whole request arrived: hand it, with this body and the head's
        /// fields (`headerCount` of them as sent), to the handler.
        case handle(body: [UInt8], headers: HTTPHeaders, headerCount: Int)
        /// Queue this answer on the connection now.
        case queue(HTTPResponse)
        /// Suspend the connection until an answer arrives.
        case suspend
        /// Resume the connection: an answer waits for it.
        case resume(MHDConnection)
        /// A second answer, or one after the request ended: dropped.
        case ignored
        /// The request ended: give these bytes back to the held-answer budget.
        case uncharge(Int)
    }

    /// Set at the start, never changed, but kept in the header the lock
    /// guards: a step under the lock writes the header as a whole, so even
    /// these are read under it (ThreadSanitizer saw the unlocked read race
    /// with a `deliver` from another thread).
    var connection: MHDConnection { storage.withLock { $0.connection } }
    var peer: PeerAddress? { storage.withLock { $0.peer } }

    /// The one way the request moves on: one lock acquisition per event.
    func transition(_ event: Event) -> Action {
        storage.withLock { s in
            let connection = s.connection
            switch event {
            case .chunk(let chunk, let limit): return s.append(chunk, limit: limit)
            case .refusedTooLarge:
                s.tooLarge = true
                return s.answeredByLayer()
            case .access: return s.access()
            case .refused: return s.answeredByLayer()
            case .handlerReturned: return s.handlerReturned()  // lock-ok: the state's own step, returns what to do
            case .suspended: return s.suspended(connection)
            case .deliver(let response): return s.deliver(response, connection)  // lock-ok: stores it; resumed after
            case .charged(let bytes):
                s.heldBytes = bytes
                return .none
            case .finished:
                s.phase = .finished
                s.pending = nil
                defer { s.heldBytes = 0 }
                return s.heldBytes > 0 ? .uncharge(s.heldBytes) : .none
            }
        }
    }
}

/// An `HTTPRequestContext`'s header: its connection and peer (set once) and
/// the state machine's state (under the context's lock).
struct HTTPRequestState {
    typealias Action = HTTPRequestContext.Action
    typealias Phase = HTTPRequestContext.Phase

    let connection: MHDConnection
    let peer: PeerAddress?
    /// The head's fields, read at the first access call, until handed on.
    var headers: HTTPHeaders
    let headerCount: Int
    var phase: Phase = .reading
    var pending: HTTPResponse?
    var responded = false
    var body: [UInt8] = []
    var tooLarge = false
    var discarded = 0
    /// Bytes of the held-answer budget its queued answer holds.
    var heldBytes = 0

    init(connection: MHDConnection, peer: PeerAddress?, headers: HTTPHeaders, headerCount: Int) {
        self.connection = connection
        self.peer = peer
        self.headers = headers
        self.headerCount = headerCount
    }

    mutating func append(_ chunk: UnsafeRawBufferPointer, limit: Int) -> Action {
        if !tooLarge && body.count + chunk.count > limit {
            tooLarge = true
            discarded = body.count
            body = []
        }
        if tooLarge {
            discarded += chunk.count
            return .dropped(discarded)
        }
        body.append(contentsOf: chunk)
        return .none
    }

    mutating func answeredByLayer() -> Action {
        responded = true
        phase = .answered
        return .none
    }

    mutating func access() -> Action {
        switch phase {
        case .reading:
            if tooLarge {
                _ = answeredByLayer()
                return .refuseTooLarge
            }
            phase = .handling
            let bytes = body
            body = []
            let fields = headers
            headers = HTTPHeaders()
            return .handle(body: bytes, headers: fields, headerCount: headerCount)
        case .resumed:
            guard let response = pending else { return .none }
            pending = nil
            phase = .answered
            return .queue(response)
        case .handling, .suspending, .suspended, .answered, .finished:
            return .none
        }
    }

    mutating func handlerReturned() -> Action {
        if let response = pending {
            pending = nil
            phase = .answered
            return .queue(response)
        }
        phase = .suspending
        return .suspend
    }

    mutating func suspended(_ connection: MHDConnection) -> Action {
        if pending != nil {
            phase = .resumed
            return .resume(connection)
        }
        phase = .suspended
        return .none
    }

    mutating func deliver(_ response: HTTPResponse, _ connection: MHDConnection) -> Action {
        guard !responded, phase != .finished else { return .ignored }
        responded = true
        pending = response
        if phase == .suspended {
            phase = .resumed
            return .resume(connection)
        }
        return .none
    }
}
