import CLinux
import CoreFoundation
import Foundation
import Primitives

/// A thread whose `CFRunLoop` does one thing: run the commands other threads
/// send through its `CommandSource` (append + signal + wake-up), in arrival
/// order, a drained batch per perform. runloopd's control loop is one: every
/// API request is handled on it.
///
/// Threads: `send`, `stop` and the readers from any thread; the handler runs
/// on the loop's thread. State: the loop, the thread and the life flags sit
/// behind one `Locked`; the command buffer has its own (it is the source's).
public final class ControlLoop<Command: Sendable>: Sendable {
    /// The thread's name.
    public let name: String
    /// The command buffer and its CF source (in the loop's default mode).
    public let commands: CommandSource<Command>

    @usableFromInline let state = Locked(ControlLoopState())
    private let exited = DispatchSemaphore(value: 0)

    /// Starts the thread and returns once its loop holds the command source.
    /// `handler` gets each drained batch on the loop's thread. (Inlinable, so
    /// the source is made where the command type is known.)
    @inlinable
    public convenience init(
        name: String, capacity: Int = Int.max, handler: @escaping @Sendable ([Command]) -> Void
    ) throws(RunLoopError) {
        try self.init(
            name: name, commands: CommandSource<Command>(capacity: capacity, coalescingWakeUps: true, handler: handler))
    }

    @usableFromInline init(name: String, commands: CommandSource<Command>) throws(RunLoopError) {
        self.name = name
        self.commands = commands
        try start()
    }

    private func start() throws(RunLoopError) {
        let ready = DispatchSemaphore(value: 0)
        try LoopThread.spawn { [self] in threadMain(ready: ready) }
        ready.wait()
    }

    private func threadMain(ready: DispatchSemaphore) {
        _ = name.withCString { clinux_set_thread_name($0) }
        let loop: CFRunLoop = CFRunLoopGetCurrent()
        commands.add(to: loop, mode: .default)
        let me = pthread_self()
        state.withLock {
            $0.loop = loop
            $0.thread = me
        }
        ready.signal()
        // The command source keeps the mode from being empty; a run returns only
        // when `stop` stops it.
        while !state.withLock({ $0.stopping }) {
            _ = CFRunLoopRunInMode(RunLoopMode.default.cfMode, 1.0e10, false)
        }
        commands.invalidate()
        // Our reference is dropped after the lock (were it the last, CF would
        // free the loop inside it).
        let released = state.withLock { s in
            defer { s.loop = nil }
            return s.loop
        }
        _ = released
        exited.signal()
    }

    /// Whether the loop still runs (not asked to stop).
    public var isRunning: Bool { state.withLock { $0.loop != nil && !$0.stopping } }

    /// Queues `command` and wakes the loop; `false` when the buffer is full or
    /// the loop is stopping. Inlinable, with `CommandSource.send`, so that it
    /// is specialised for the caller's command type: the request hot path
    /// looks no generic type up at run time.
    @inlinable
    public func send(_ command: Command) -> Bool {
        guard let loop = state.withLock({ $0.stopping ? nil : $0.loop }) else { return false }
        return commands.send(command, to: loop)
    }

    /// Stops the loop (the batch being handled finishes first) and joins the
    /// thread, waiting at most `timeout` seconds. Returns the commands that were
    /// never handled, for the caller to answer.
    @discardableResult
    public func stop(timeout: Double = 1) -> [Command] {
        let (loop, thread, first) = state.withLock { s in
            defer { s.stopping = true }
            return (s.loop, s.thread, !s.stopping)
        }
        guard first else { return commands.drain() }
        if let loop {
            CFRunLoopStop(loop)
            CFRunLoopWakeUp(loop)
        }
        if exited.wait(timeout: .now() + timeout) == .success, let thread {
            var result: UnsafeMutableRawPointer?
            pthread_join(thread, &result)
        }
        return commands.drain()
    }
}

/// The control loop's thread and life flags. Not nested in the generic
/// `ControlLoop`, so its type is known at compile time (a nested type would
/// be looked up at run time on every `send`).
// @unchecked: a CFRunLoop may be woken and stopped from any thread (CF's own rule).
@usableFromInline struct ControlLoopState: @unchecked Sendable {
    @usableFromInline var loop: CFRunLoop?
    @usableFromInline var thread: pthread_t?
    @usableFromInline var stopping = false

    @usableFromInline init() {}
}
