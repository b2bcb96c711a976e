import CoreFoundation
import Foundation
import Primitives

/// What a user asks for when performing a selector on a worker
/// (`performSelector:onThread:withObject:waitUntilDone:modes:`).
public struct PerformSpec: Sendable {
    /// The selector and arguments.
    public var call: SelectorCall
    /// The modes it may run in.
    public var modes: [RunLoopMode]
    /// Seconds to wait (`afterDelay:`): when present, even 0, the perform is a
    /// one-shot CFRunLoopTimer on the target loop, as Cocoa's
    /// `performSelector:withObject:afterDelay:` is; when nil it goes through a
    /// custom source, as `performSelector:onThread:withObject:waitUntilDone:` does.
    public var afterDelay: Double?
    /// How the perform reaches the loop: the selector path (a custom source
    /// per mode, or a timer with `afterDelay`), or a block
    /// (`CFRunLoopPerformBlock`, see `PerformVia`).
    public var via: PerformVia

    /// Creates a spec. The modes default as in Cocoa: `afterDelay:` performs run
    /// in the default mode only, `onThread:` performs and blocks in the common modes.
    public init(
        call: SelectorCall, modes: [RunLoopMode]? = nil, afterDelay: Double? = nil, via: PerformVia = .selector
    ) {
        self.call = call
        self.modes = modes ?? (afterDelay == nil ? [.common] : [.default])
        self.afterDelay = afterDelay
        self.via = via
    }
}

/// The answer to one perform.
public struct PerformResult: Sendable {
    /// The perform's id.
    public var performId: String
    /// The worker's id.
    public var thread: String
    /// The selector name.
    public var selector: String
    /// The selector's value, or why there is none (failed, deadline, worker ended, cancelled).
    public var outcome: Result<Value, RunLoopError>
    /// Milliseconds between queueing and the start of the run (0 if it never ran).
    public var queuedMs: Double
    /// Milliseconds the selector ran.
    public var ranMs: Double
    /// A text of this result made once by whoever needs it first, shared by
    /// every copy (the HTTP layer: its JSON, which both the caller's answer
    /// and the history's row are).
    public let text = Memo<[UInt8]>()
}

/// Who stopped waiting for a perform, and what they are told: the caller's
/// own deadline. The engine only schedules it; the words (and the status an
/// HTTP layer maps the error to) are the caller's.
public struct CallerDeadline: Sendable {
    /// Seconds the caller waits.
    public var seconds: Double
    /// The error the caller gets once `seconds` pass; its argument is the perform's id.
    public var error: @Sendable (_ performId: String) -> RunLoopError

    /// Creates a deadline.
    public init(seconds: Double, error: @escaping @Sendable (_ performId: String) -> RunLoopError) {
        self.seconds = seconds
        self.error = error
    }
}

/// One queued perform. Immutable: where it is (delayed, pending, taken) is
/// known only to its worker's `PerformQueue`.
final class PerformRequest: Sendable {
    let id: String
    let call: SelectorCall
    let modes: [RunLoopMode]
    let afterDelay: Double
    /// Carried by a one-shot timer (`afterDelay:` given, even 0).
    let viaTimer: Bool
    /// Carried by CF's block list (`CFRunLoopPerformBlock`).
    let viaBlock: Bool
    let queuedAt = Date()
    let queuedMono = Monotonic.now()
    let fireAt: Date?
    /// The caller's answer: the run's result, or their deadline, or the end.
    let reply: ReplyOnce<PerformResult>

    init(
        id: String, call: SelectorCall, modes: [RunLoopMode], afterDelay: Double?, viaBlock: Bool = false,
        completion: (@Sendable (PerformResult) -> Void)?
    ) {
        self.viaBlock = viaBlock
        self.id = id
        self.call = call
        self.modes = modes
        self.afterDelay = afterDelay ?? 0
        self.viaTimer = afterDelay != nil
        self.fireAt = afterDelay.map { Date(timeIntervalSinceNow: $0) }
        self.reply = ReplyOnce(completion ?? { _ in })
    }

    func runs(in mode: String) -> Bool { modes.contains { $0.name == mode } }

    var snapshot: PerformSnapshot {
        PerformSnapshot(
            id: id, call: call, modes: modes.map(\.name), queuedAt: queuedAt, afterDelay: afterDelay, fireAt: fireAt,
            delayed: viaTimer, via: viaBlock ? .block : .selector)
    }
}

/// The bare version-0 source that carries a worker's performs into one mode
/// (signal + wake-up). It holds no work: its perform routine asks the
/// worker's `PerformQueue` what to run.
// @unchecked: the CF source, set once in init, is a thread-safe CF object.
final class PerformCarrier: @unchecked Sendable, SourceCallbacks {
    /// Set once in `init`; CF objects are thread-safe.
    private(set) var source: CFRunLoopSource! = nil
    private let onPerform: @Sendable () -> Void

    init(onPerform: @escaping @Sendable () -> Void) {
        self.onPerform = onPerform
        self.source = SourceFactory.makeSource0(order: 0, target: self)
    }

    deinit { CFRunLoopSourceInvalidate(source) }

    func sourceScheduled(mode: CFRunLoopMode?) {}
    func sourceCancelled(mode: CFRunLoopMode?) {}
    func sourcePerform() { onPerform() }
}

/// Every perform of one worker and where it is: delayed (its one-shot timer
/// has not fired), pending (queued for its modes) or taken (running or
/// answered: no longer here). The only place that knows.
///
/// Each mode with pending work has a `PerformCarrier` in it; a carrier leaves
/// its mode once no pending perform names the mode, so a loop with nothing
/// else in the mode still finishes (CF's own rule for performs).
///
/// Membership is decided under the worker's lock (`wanted`) and made after
/// it: no CF call runs under the lock. One thread at a time, the applier,
/// makes the CF calls (`CFRunLoopAddSource` / `CFRunLoopRemoveSource`),
/// one change at a time, recording each under the lock before it takes the
/// next (`applied`); whoever decides a change while nobody applies becomes the
/// applier. So CF sees every carrier's adds and removes in the order they
/// were decided, even when the thread queueing a perform and the loop
/// retiring its carrier race. A carrier is signalled only once it is in its
/// mode and no change of it is under way: by the thread that queued the
/// perform when it already was, else by the applier right after the add.
///
/// Plain data, guarded by the owning worker's lock.
struct PerformQueue {
    struct Carrier {
        let carrier: PerformCarrier
        let mode: RunLoopMode
        /// Some pending perform names the mode: the carrier belongs in it.
        var wanted = false
        /// In its mode, as far as the CF calls made so far go.
        var inLoop = false
        /// Signalled and woken, and its perform routine has not run since: a
        /// burst of performs into a busy thread costs one wake-up.
        var signalled = false
    }

    /// One membership change, decided under the lock, made by the applier
    /// after it.
    struct Change {
        let carrier: PerformCarrier
        let mode: RunLoopMode
        /// Add (true) or remove.
        let add: Bool
    }

    /// What `enqueue` did.
    enum Enqueued {
        /// These modes have no carrier yet: nothing was queued. The caller
        /// makes them after the lock (creating a CF source) and asks again.
        case needsCarriers([RunLoopMode])
        /// Queued. `toSignal`: carriers in their modes and not signalled
        /// since their last perform routine (the caller signals them and
        /// wakes the loop once, after the lock). `settled`: every carrier of
        /// the perform is in its mode. `change`: the caller became the
        /// applier and makes this change first.
        case queued(toSignal: [CFRunLoopSource], settled: Bool, change: Change?)
    }

    private(set) var pending: [(seq: UInt64, request: PerformRequest)] = []
    private(set) var delayed: [(request: PerformRequest, timer: CFRunLoopTimer)] = []
    /// Blocks handed to CF (`CFRunLoopPerformBlock`) that have not run, in
    /// queue order: CF's own list holds them; this one knows which are still due.
    private(set) var blocks: [PerformRequest] = []
    private var carriers: [String: Carrier] = [:]
    private var lastSeq: UInt64 = 0
    /// A thread is making membership changes.
    private var applying = false
    /// The mode whose carrier's change the applier is making now.
    private var changing: String?

    var count: Int { pending.count + delayed.count + blocks.count }

    /// The delayed performs and their one-shot timers.
    var delayedTimers: [(PerformRequest, CFRunLoopTimer)] { delayed.map { ($0.request, $0.timer) } }

    /// Performs not yet taken, in no particular order.
    var queued: [PerformRequest] { delayed.map(\.request) + pending.map(\.request) + blocks }

    /// A block perform handed to CF.
    mutating func addBlock(_ request: PerformRequest) { blocks.append(request) }

    /// CF ran a block: takes its perform (true) unless the worker ended first.
    mutating func takeBlock(_ request: PerformRequest) -> Bool {
        guard let index = blocks.firstIndex(where: { $0 === request }) else { return false }
        blocks.remove(at: index)
        return true
    }

    mutating func addDelayed(_ request: PerformRequest, timer: CFRunLoopTimer) {
        delayed.append((request, timer))
    }

    /// A delayed perform's timer fired: takes it (true) unless it was cancelled.
    mutating func takeDelayed(_ request: PerformRequest) -> Bool {
        guard let index = delayed.firstIndex(where: { $0.request === request }) else { return false }
        delayed.remove(at: index)
        return true
    }

    /// Queues `request` for its modes, each mode's carrier wanted in it;
    /// `made` holds carriers the caller made for modes that had none (those
    /// used are taken out of it; the rest the caller drops after the lock).
    mutating func enqueue(_ request: PerformRequest, made: inout [String: PerformCarrier]) -> Enqueued {
        let missing = request.modes.filter { carriers[$0.name] == nil && made[$0.name] == nil }
        guard missing.isEmpty else { return .needsCarriers(missing) }
        lastSeq &+= 1
        pending.append((lastSeq, request))
        var toSignal: [CFRunLoopSource] = []
        var settled = true
        for mode in request.modes {
            let existing =
                carriers[mode.name] ?? made.removeValue(forKey: mode.name).map { Carrier(carrier: $0, mode: mode) }
            guard var entry = existing else { continue }  // not reached: every mode has one (checked above)
            entry.wanted = true
            if entry.inLoop && changing != mode.name {
                if !entry.signalled {
                    entry.signalled = true
                    toSignal.append(entry.carrier.source)
                }
            } else {
                // Not in its mode yet (or a change of it is under way): the
                // applier adds it, then signals it.
                settled = false
            }
            carriers[mode.name] = entry
        }
        return .queued(toSignal: toSignal, settled: settled, change: settled ? nil : claim())
    }

    /// The start of `mode`'s perform routine: the routine runs what was queued
    /// up to now (later performs wait for the next turn, as with CF's own
    /// perform blocks). Returns that bound.
    mutating func beginRoutine(mode: String) -> UInt64 {
        carriers[mode]?.signalled = false
        return lastSeq
    }

    /// Takes the oldest pending perform that may run in `mode`, queued no later
    /// than `bound`.
    mutating func takeNext(in mode: String, upTo bound: UInt64) -> PerformRequest? {
        guard let index = pending.firstIndex(where: { $0.seq <= bound && $0.request.runs(in: mode) }) else {
            return nil
        }
        return pending.remove(at: index).request
    }

    /// Each named mode's carrier is no longer wanted in its mode when no
    /// pending perform names the mode. Returns the modes whose carrier leaves,
    /// and the first change to make when the caller became the applier.
    mutating func retire(_ modes: [String]) -> (retired: [String], change: Change?) {
        var retired: [String] = []
        for name in modes {
            guard var entry = carriers[name], entry.wanted, !pending.contains(where: { $0.request.runs(in: name) })
            else { continue }
            entry.wanted = false
            // A leaving carrier forgets its wake-up: the next perform fires again,
            // so a carrier re-added later is never left signalled on a sleeping loop.
            entry.signalled = false
            carriers[name] = entry
            retired.append(name)
        }
        return (retired, retired.isEmpty ? nil : claim())
    }

    /// The applier made `change`: records it. Returns the carrier to signal
    /// (one just added for pending performs) and the next change to make, or
    /// nil when none is due (the role is given up).
    mutating func applied(_ change: Change) -> (signal: CFRunLoopSource?, next: Change?) {
        changing = nil
        var signal: CFRunLoopSource?
        if var entry = carriers[change.mode.name], entry.carrier === change.carrier {
            entry.inLoop = change.add
            if !change.add {
                entry.signalled = false
            } else if entry.wanted && !entry.signalled {
                entry.signalled = true
                signal = entry.carrier.source
            }
            carriers[change.mode.name] = entry
        }
        let next = nextChange()
        if next == nil { applying = false }
        return (signal, next)
    }

    /// Takes the applier's role when nobody has it and a change is due.
    private mutating func claim() -> Change? {
        guard !applying, let change = nextChange() else { return nil }
        applying = true
        return change
    }

    /// A carrier whose membership differs from what is wanted, marked as
    /// being changed.
    private mutating func nextChange() -> Change? {
        guard let entry = carriers.values.first(where: { $0.wanted != $0.inLoop }) else { return nil }
        changing = entry.mode.name
        return Change(carrier: entry.carrier, mode: entry.mode, add: entry.wanted)
    }

    /// Whether perform `id` is still waiting for its delay.
    func isDelayed(_ id: String) -> Bool { delayed.contains { $0.request.id == id } }

    /// Cancels the delayed performs of `selector` (and, when given, exactly
    /// these arguments): returns them with their timers.
    mutating func cancelDelayed(selector: String, args: [String: Value]?) -> [(
        request: PerformRequest, timer: CFRunLoopTimer
    )] {
        let matches: ((request: PerformRequest, timer: CFRunLoopTimer)) -> Bool = { entry in
            entry.request.call.selector == selector && (args == nil || entry.request.call.args == args)
        }
        let matching = delayed.filter(matches)
        delayed.removeAll(where: matches)
        return matching
    }

    /// The end of the worker: everything still queued, the delayed timers and
    /// the carriers, for the caller to invalidate and answer after the lock.
    /// (An applier still at work finds no carrier left and stops.)
    mutating func removeAll() -> (requests: [PerformRequest], timers: [CFRunLoopTimer], carriers: [PerformCarrier]) {
        defer {
            pending.removeAll()
            delayed.removeAll()
            blocks.removeAll()
            carriers.removeAll()
        }
        return (queued, delayed.map(\.timer), carriers.values.map(\.carrier))
    }
}
