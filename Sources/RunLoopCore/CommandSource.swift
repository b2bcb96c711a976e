import CoreFoundation
import Foundation
import Primitives

/// The custom input source of Apple's run-loop guide: a synchronized command
/// buffer behind a version-0 `CFRunLoopSource`.
///
/// Any thread `enqueue`s commands and calls `fire(on:)`
/// (`CFRunLoopSourceSignal` + `CFRunLoopWakeUp`); the loop's thread then runs the
/// perform routine, which drains the whole buffer in order and hands the batch
/// to the handler (so a burst becomes one perform call). `signal()` marks the
/// source ready without waking the loop: the work then waits for the next
/// unrelated wake-up, the delay users hit.
///
/// Thread-safety: `send`/`enqueue`/`fire` from any thread; the handler runs on
/// the loop's thread; the buffer and counters sit behind one `Locked`.
// @unchecked: the CF source and loop, set once at start, are thread-safe CF objects.
public final class CommandSource<Command: Sendable>: @unchecked Sendable, SourceCallbacks {
    /// Counters of what the source's routines saw.
    public struct Statistics: Sendable, Hashable {
        /// Times the schedule routine ran (added to a mode).
        public var scheduled = 0
        /// Times the cancel routine ran (removed from a mode or invalidated).
        public var cancelled = 0
        /// Times the perform routine ran.
        public var performs = 0
        /// Commands handed to the handler in all.
        public var commands = 0
        /// The largest batch one perform call drained.
        public var largestBatch = 0
        /// Commands waiting in the buffer now.
        public var pending = 0
        /// Sends that skipped their wake-up because one was already pending
        /// (coalescing sources only).
        public var coalesced = 0
    }

    /// The CF source (version 0).
    public private(set) var source: CFRunLoopSource! = nil
    /// The most commands the buffer holds; `enqueue` refuses beyond it.
    public let capacity: Int

    /// When true, `send` signals and wakes the loop only when no earlier wake-up
    /// is still on its way (a burst of sends costs one `CFRunLoopWakeUp`).
    public let coalescesWakeUps: Bool

    @usableFromInline struct Buffer {
        @usableFromInline var commands: [Command] = []
        /// A `send` fired and the perform routine has not drained the buffer since.
        @usableFromInline var wakeUpPending = false
        @usableFromInline var stats = Statistics()

        @usableFromInline init() {}
    }

    /// The buffer: any thread appends, the loop's thread drains.
    @usableFromInline let buffer = Locked(Buffer())
    @usableFromInline let handler: @Sendable ([Command]) -> Void
    /// The perform routine's body (`performBatch`), made where the command
    /// type is known (see `init(order:capacity:coalescingWakeUps:handler:)`).
    private let performer: (CommandSource) -> Void

    /// Creates the source. `handler` runs on the loop's thread with each drained batch.
    ///
    /// With `coalescingWakeUps`, a `send` that finds an earlier send's wake-up
    /// still undelivered only appends: the perform routine that wake-up causes
    /// drains both. Use it only for a source that stays in its mode while it
    /// holds commands (the wake-up must reach a perform).
    ///
    /// Inlinable: the perform routine's body is made here, specialised for
    /// the caller's command type, so draining a batch looks no generic type
    /// up at run time (CF calls the routine through a protocol, which only a
    /// generic copy could serve).
    @inlinable
    public convenience init(
        order: Int = 0, capacity: Int = Int.max, coalescingWakeUps: Bool = false,
        handler: @escaping @Sendable ([Command]) -> Void
    ) {
        self.init(
            order: order, capacity: capacity, coalescingWakeUps: coalescingWakeUps, handler: handler,
            performer: { $0.performBatch() })
    }

    @usableFromInline init(
        order: Int, capacity: Int, coalescingWakeUps: Bool, handler: @escaping @Sendable ([Command]) -> Void,
        performer: @escaping (CommandSource) -> Void
    ) {
        self.capacity = capacity
        self.coalescesWakeUps = coalescingWakeUps
        self.handler = handler
        self.performer = performer
        self.source = SourceFactory.makeSource0(order: order, target: self)
    }

    deinit {
        CFRunLoopSourceInvalidate(source)
    }

    /// `CFRunLoopAddSource` in `mode` (schedule routine runs).
    public func add(to runLoop: CFRunLoop, mode: RunLoopMode) {
        CFRunLoopAddSource(runLoop, source, mode.cfMode)
    }

    /// `CFRunLoopRemoveSource` from `mode` (cancel routine runs). A coalescing
    /// source forgets its pending wake-up: the next send fires again, so a
    /// source re-added later is never left signalled on a sleeping loop.
    public func remove(from runLoop: CFRunLoop, mode: RunLoopMode) {
        CFRunLoopRemoveSource(runLoop, source, mode.cfMode)
        buffer.withLock { $0.wakeUpPending = false }
    }

    /// Appends a command to the buffer; `false` when the buffer is full.
    @discardableResult
    public func enqueue(_ command: Command) -> Bool {
        enqueueClaimingWakeUp(command, wakeUp: false).accepted
    }

    /// `CFRunLoopSourceSignal` + `CFRunLoopWakeUp`: the loop wakes and performs.
    @inlinable
    public func fire(on runLoop: CFRunLoop) {
        CFRunLoopSourceSignal(source)
        CFRunLoopWakeUp(runLoop)
    }

    /// `CFRunLoopSourceSignal` alone: the source is ready, but a sleeping loop
    /// does not notice until something else wakes it.
    @inlinable
    public func signal() {
        CFRunLoopSourceSignal(source)
    }

    /// Enqueues and fires in one call; `false` (and nothing signalled) when full.
    /// A coalescing source skips the fire when an earlier one is still pending.
    /// (`send` and `enqueueClaimingWakeUp` are inlinable: specialised for the
    /// caller's command type, they look no generic type up at run time.)
    @inlinable @discardableResult
    public func send(_ command: Command, to runLoop: CFRunLoop, wakeUp: Bool = true) -> Bool {
        let (accepted, mustFire) = enqueueClaimingWakeUp(command, wakeUp: wakeUp)
        guard accepted else { return false }
        if mustFire {
            if wakeUp { fire(on: runLoop) } else { signal() }
        }
        return true
    }

    /// Appends a command and tells whether the caller must fire the source:
    /// always, unless this source coalesces and a wake-up is already pending.
    /// (`send` is this plus the fire; callers that must add the source to a
    /// mode between the two use it directly.)
    @inlinable
    public func enqueueClaimingWakeUp(_ command: Command, wakeUp: Bool = true) -> (accepted: Bool, mustFire: Bool) {
        let coalesces = coalescesWakeUps
        let capacity = self.capacity
        return buffer.withLock { b in
            guard b.commands.count < capacity else { return (false, false) }
            b.commands.append(command)
            b.stats.pending = b.commands.count
            guard wakeUp && coalesces else { return (true, true) }
            if b.wakeUpPending {
                b.stats.coalesced += 1
                return (true, false)
            }
            b.wakeUpPending = true
            return (true, true)
        }
    }

    /// `CFRunLoopSourceInvalidate`: removed from every mode, never fires again.
    public func invalidate() {
        CFRunLoopSourceInvalidate(source)
    }

    /// Whether the source is still valid.
    public var isValid: Bool { CFRunLoopSourceIsValid(source) }

    /// Commands waiting in the buffer.
    public var pendingCount: Int { buffer.withLock { $0.commands.count } }

    /// A consistent copy of the counters.
    public var statistics: Statistics { buffer.withLock { $0.stats } }

    /// Takes every buffered command out (for a caller that ends the source and
    /// must answer what never ran).
    public func drain() -> [Command] {
        buffer.withLock { b in
            defer {
                b.commands.removeAll()
                b.stats.pending = 0
                b.wakeUpPending = false
            }
            return b.commands
        }
    }

    func sourceScheduled(mode: CFRunLoopMode?) {
        buffer.withLock { $0.stats.scheduled += 1 }
    }

    func sourceCancelled(mode: CFRunLoopMode?) {
        buffer.withLock { $0.stats.cancelled += 1 }
    }

    func sourcePerform() { performer(self) }

    /// Drains the buffer and hands the batch to the handler.
    @inlinable
    func performBatch() {
        let batch: [Command] = buffer.withLock { b in
            let batch = b.commands
            b.commands.removeAll(keepingCapacity: true)
            b.wakeUpPending = false
            b.stats.performs += 1
            b.stats.commands += batch.count
            b.stats.largestBatch = max(b.stats.largestBatch, batch.count)
            b.stats.pending = 0
            return batch
        }
        if !batch.isEmpty { handler(batch) }
    }
}
