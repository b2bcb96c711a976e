import CMicroHTTPD
import Dispatch
import Primitives
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Notices at once that an event stream's client has gone, so its stream
/// (and its place in the stream budget) is freed then, not at the next
/// heartbeat's failed write.
///
/// A stream waiting for events has its connection suspended, which
/// libmicrohttpd no longer watches. Each stream's socket is added to one
/// epoll set of our own for `EPOLLRDHUP` (the client closed or shut down its
/// side; `EPOLLHUP` and `EPOLLERR`, a reset, always come too), one-shot; a
/// dispatch read source on that epoll descriptor wakes only when one fires
/// (no polling) and ends the stream with `.clientDisconnected`, which
/// resumes the connection so libmicrohttpd closes it. A client that
/// half-closes its side while still reading counts as gone: an
/// `EventSource` never does.
///
/// Registrations are never removed by hand: the kernel drops one when the
/// socket is closed, and an event names the stream by number, not by
/// descriptor, so a reused descriptor never reaches another stream.
///
/// Threads: `watch` on libmicrohttpd's threads, `forget` wherever a stream
/// detaches, the handler on its own serial queue. One `Locked` (the table),
/// under which no call-out happens.
final class StreamHangups: @unchecked Sendable {
    // @unchecked: the dispatch source is not marked Sendable; it is made in
    // init and cancelled once, in `close`.
    private let epoll: Int32
    private let queue = DispatchQueue(label: "runloopd.http.stream-hangups")
    private var source: (any DispatchSourceRead)?
    private let table = Locked<(next: UInt64, streams: [UInt64: EventStream])>((0, [:]))
    /// Streams ended because their client went away (since start).
    let noticed = Atomic<Int>(0)

    init() {
        epoll = runloopd_epoll_create()
        guard epoll >= 0 else { return }
        let source = DispatchSource.makeReadSource(fileDescriptor: epoll, queue: queue)
        source.setEventHandler { [weak self] in self?.drain() }
        source.setCancelHandler { [epoll] in closeDescriptor(epoll) }
        source.activate()
        self.source = source
    }

    /// Stops watching (the server stopped); closes the epoll set.
    func close() {
        source?.cancel()
    }

    /// Watches `fd`, the socket `stream` is written to; returns the stream's
    /// number (for `forget`), or nil when it cannot be watched.
    func watch(_ stream: EventStream, fd: Int32) -> UInt64? {
        guard epoll >= 0, fd >= 0 else { return nil }
        let id = table.withLock { t in
            t.next += 1
            t.streams[t.next] = stream
            return t.next
        }
        if runloopd_epoll_watch_hangup(epoll, fd, id) != 0 {
            forget(id)
            return nil
        }
        return id
    }

    /// The stream detached: no event may reach it any more.
    func forget(_ id: UInt64) {
        _ = table.withLock { $0.streams.removeValue(forKey: id) }
    }

    /// Ends the streams whose clients hung up (on `queue`).
    private func drain() {
        var taken = [UInt64](repeating: 0, count: 64)
        while true {
            let count = Int(runloopd_epoll_take(epoll, &taken, Int32(taken.count)))
            guard count > 0 else { return }
            let ids = taken.prefix(count)
            let gone = table.withLock { t in ids.compactMap { t.streams.removeValue(forKey: $0) } }
            noticed.add(gone.count, ordering: .relaxed)
            for stream in gone { stream.finish(.clientDisconnected) }
            if count < taken.count { return }
        }
    }
}

/// `close(2)` (the class's own `close` hides the free function's name).
private func closeDescriptor(_ fd: Int32) {
    _ = close(fd)
}
