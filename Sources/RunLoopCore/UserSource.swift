import CLinux
import CoreFoundation
import Foundation
import Primitives
import Synchronization

/// The kind of a user source.
public enum SourceKind: String, Sendable, CaseIterable, Hashable {
    /// A version-0 (custom) source: fires when signalled and the loop wakes.
    case custom
    /// A version-1 (port) source on an eventfd: fires when a message arrives.
    case port
}

/// What a user asks for when adding a source.
public struct SourceSpec: Sendable {
    /// custom or port.
    public var kind: SourceKind
    /// The mode (`.common` for every common mode).
    public var mode: RunLoopMode
    /// CF's order among sources (lower runs first).
    public var order: Int
    /// A selector to run on every fire (a port source's runs once per message
    /// and receives it).
    public var action: SelectorCall?
    /// Who added it.
    public var role: ItemRole

    /// Creates a spec.
    public init(
        kind: SourceKind, mode: RunLoopMode = .default, order: Int = 0, action: SelectorCall? = nil,
        role: ItemRole = .user
    ) {
        self.kind = kind
        self.mode = mode
        self.order = order
        self.action = action
        self.role = role
    }
}

/// A message delivered to a port source.
public struct PortMessage: Sendable, Hashable {
    /// The sender's message id.
    public var msgid: Int
    /// The payload.
    public var data: String
    /// When it was sent.
    public var sentAt: Date
    /// When the receiving loop handled it (nil while queued).
    public var receivedAt: Date?
}

/// A user source as reported.
public struct SourceSnapshot: Sendable {
    /// Id (`s1`, …).
    public var id: String
    /// custom or port.
    public var kind: SourceKind
    /// Who added it.
    public var role: ItemRole
    /// The mode it was added to first.
    public var mode: String
    /// Every mode it is in now (`CFRunLoopAddSource` per mode).
    public var modes: [String]
    /// CF order.
    public var order: Int
    /// Whether still valid.
    public var valid: Bool
    /// Perform routine calls.
    public var fired: Int
    /// Schedule routine calls (custom sources; CF calls none for port sources).
    public var scheduled: Int
    /// Cancel routine calls.
    public var cancelled: Int
    /// Schedule routine calls per mode.
    public var scheduledIn: [String: Int]
    /// Cancel routine calls per mode.
    public var cancelledIn: [String: Int]
    /// The action's last result (or error), if it ran.
    public var lastAction: Result<Value, RunLoopError>?
    /// Whether signalled and not yet performed (custom).
    public var signalled: Bool
    /// Messages received (port).
    public var received: Int
    /// Messages queued, not yet handled (port).
    public var queued: Int
    /// The last messages handled (port), newest last.
    public var recentMessages: [PortMessage]
    /// The action, if any.
    public var action: SelectorCall?
    /// The port's descriptor (port sources), for people reading `/proc`.
    public var fd: Int32?
    /// When the oldest queued message was sent (port): since then its
    /// descriptor is readable, and epoll hands back the one ready longest.
    public var queuedSince: Date? = nil
}

/// A user-added CF source on a worker.
///
/// Threads: routines run on the worker's thread; `post`, `signal` and reads
/// come from any thread. Counters and the message queue sit behind one
/// `Locked` (the eventfd write happens under it, so the descriptor cannot be
/// closed and reused in between: a syscall, no foreign code); the CF source is
/// set once in `init`; whether it is still valid is an atomic flag
/// (`isLive`), so the worker reads it under its own lock without a CF call.
// @unchecked: the CF source, set once in init, is a thread-safe CF object.
final class UserSource: @unchecked Sendable, SourceCallbacks, ModeScheduled {
    let id: String
    let spec: SourceSpec
    private(set) var source: CFRunLoopSource! = nil
    let fd: Int32
    private struct State {
        var fired = 0
        var scheduled = 0
        var cancelled = 0
        var scheduledIn: [String: Int] = [:]
        var cancelledIn: [String: Int] = [:]
        var lastAction: Result<Value, RunLoopError>?
        var received = 0
        var queue: [PortMessage] = []
        var recent = Ring<PortMessage>(capacity: 16)
        var closed = false
        var signalled = false
    }
    private let state: Locked<State>
    /// False once `invalidate` ran (the only way this source becomes invalid).
    private let live = Atomic<Bool>(true)
    /// The modes it is in.
    let modeSet: ItemModes
    private let queueLimit: Int
    private let onFire: @Sendable (UserSource, [PortMessage]) -> Void
    /// The schedule (true) or cancel (false) routine ran for a mode.
    private let onModeChange: @Sendable (UserSource, String, Bool) -> Void

    /// Creates the source (not yet added). For port sources, opens the eventfd.
    init(
        id: String, spec: SourceSpec, queueLimit: Int,
        onFire: @escaping @Sendable (UserSource, [PortMessage]) -> Void,
        onModeChange: @escaping @Sendable (UserSource, String, Bool) -> Void = { _, _, _ in }
    ) throws(RunLoopError) {
        self.id = id
        self.spec = spec
        self.queueLimit = queueLimit
        self.onFire = onFire
        self.onModeChange = onModeChange
        self.modeSet = ItemModes(spec.mode.name)
        self.state = Locked(State())
        if spec.kind == .port {
            let fd = clinux_eventfd()
            guard fd >= 0 else {
                throw RunLoopError.limit(.noDescriptors, "eventfd failed: \(String(cString: strerror(errno)))")
            }
            self.fd = fd
            self.source = SourceFactory.makeSource1(order: spec.order, fd: fd, target: self)
        } else {
            self.fd = -1
            self.source = SourceFactory.makeSource0(order: spec.order, target: self)
        }
    }

    deinit { closeDescriptor() }

    /// Queues a message and rings the eventfd (port sources). Returns whether
    /// the queue was empty before (the source now has work waiting).
    @discardableResult
    func post(msgid: Int, data: String) throws(RunLoopError) -> Bool {
        let valid = CFRunLoopSourceIsValid(source)
        return try state.withLock { s throws(RunLoopError) in
            guard !s.closed, valid else { throw .conflict(.sourceInvalid, "source \(id) was invalidated") }
            guard s.queue.count < queueLimit else {
                throw .limit(.queueFull, "source \(id) already holds \(queueLimit) unhandled messages")
            }
            s.queue.append(PortMessage(msgid: msgid, data: data, sentAt: Date(), receivedAt: nil))
            var one: UInt64 = 1
            _ = write(fd, &one, 8)
            return s.queue.count == 1
        }
    }

    /// Signals (and optionally wakes) a custom source. Returns whether it was
    /// not signalled before (the source now has work waiting).
    @discardableResult
    func signal(on loop: CFRunLoop, wakeUp: Bool) -> Bool {
        let fresh = state.withLock { s in
            defer { s.signalled = true }
            return !s.signalled
        }
        CFRunLoopSourceSignal(source)
        if wakeUp { CFRunLoopWakeUp(loop) }
        return fresh
    }

    /// Whether work waits for the source: signalled (custom) or messages
    /// queued (port), and not yet performed.
    var hasWorkWaiting: Bool {
        guard isLive else { return false }
        return state.withLock { s in s.signalled || !s.queue.isEmpty }
    }

    /// Invalidates the source (cancel routine runs), then closes its descriptor.
    func invalidate() {
        live.store(false, ordering: .releasing)
        CFRunLoopSourceInvalidate(source)
        closeDescriptor()
    }

    private func closeDescriptor() {
        state.withLock { s in
            if fd >= 0 && !s.closed { close(fd) }
            s.closed = true
        }
    }

    var isValid: Bool { CFRunLoopSourceIsValid(source) }

    /// Whether `invalidate` has not run: no CF call, so it may be read under
    /// any lock.
    var isLive: Bool { live.load(ordering: .acquiring) }

    /// Records the action's result.
    func recordAction(_ result: Result<Value, RunLoopError>) {
        state.withLock { $0.lastAction = result }
    }

    var snapshot: SourceSnapshot {
        let valid = CFRunLoopSourceIsValid(source)
        // The modes first: `ItemModes` has a lock of its own, never taken under this one.
        let modes = modeSet.all
        // Built under the lock: no copy of the message ring outlives it (a copy
        // released on this thread while the loop grows the ring in place is a
        // race ThreadSanitizer rightly reports).
        return state.withLock { s in
            SourceSnapshot(
                id: id, kind: spec.kind, role: spec.role, mode: spec.mode.name, modes: modes, order: spec.order,
                valid: valid, fired: s.fired, scheduled: s.scheduled, cancelled: s.cancelled,
                scheduledIn: s.scheduledIn, cancelledIn: s.cancelledIn, lastAction: s.lastAction,
                signalled: valid && s.signalled, received: s.received, queued: s.queue.count,
                recentMessages: s.recent.items, action: spec.action, fd: fd >= 0 ? fd : nil,
                queuedSince: s.queue.first?.sentAt)
        }
    }

    func sourceScheduled(mode: CFRunLoopMode?) { modeChanged(mode, added: true) }

    func sourceCancelled(mode: CFRunLoopMode?) { modeChanged(mode, added: false) }

    /// CF scheduled the source in `mode` (`added`) or cancelled it there:
    /// counted under the lock, told after it.
    private func modeChanged(_ mode: CFRunLoopMode?, added: Bool) {
        let name = mode.flatMap { RunLoopMode.name(ofCF: $0) } ?? "?"
        state.withLock { s in
            if added {
                s.scheduled += 1
                s.scheduledIn[name, default: 0] += 1
            } else {
                s.cancelled += 1
                s.cancelledIn[name, default: 0] += 1
            }
        }
        onModeChange(self, name, added)
    }

    func sourcePerform() {
        // Port sources: CF already read the eventfd's 8 bytes (resetting its
        // counter); drain every queued message so none waits for another edge.
        let batch = state.withLock { s in
            s.fired += 1
            s.signalled = false
            var batch = s.queue
            s.queue.removeAll()
            let now = Date()
            for index in batch.indices {
                batch[index].receivedAt = now
                s.recent.append(batch[index])
            }
            s.received += batch.count
            return batch
        }
        onFire(self, batch)
    }
}
