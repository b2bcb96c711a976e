import CoreFoundation
import Foundation
import Primitives
import Synchronization

/// What a user asks for when adding an observer.
public struct ObserverSpec: Sendable {
    /// The activities to watch.
    public var activities: [Activity]
    /// Keep observing (true) or fire once.
    public var repeats: Bool
    /// The mode (`.common` for every common mode).
    public var mode: RunLoopMode
    /// CF's order among observers.
    public var order: Int
    /// A selector run on the loop's thread at every matching activity.
    public var action: SelectorCall?

    /// Creates a spec.
    public init(
        activities: [Activity] = Activity.allCases, repeats: Bool = true, mode: RunLoopMode = .common,
        order: Int = 0, action: SelectorCall? = nil
    ) {
        self.activities = activities
        self.repeats = repeats
        self.mode = mode
        self.order = order
        self.action = action
    }
}

/// An observer as reported.
public struct ObserverSnapshot: Sendable {
    /// Id (`ob1`, …).
    public var id: String
    /// Watched activities.
    public var activities: [Activity]
    /// Repeats or once.
    public var repeats: Bool
    /// Mode name.
    public var mode: String
    /// CF order.
    public var order: Int
    /// Whether still valid (a one-shot observer is invalidated after it fires).
    public var valid: Bool
    /// Callbacks so far.
    public var fired: Int
    /// The action, if any.
    public var action: SelectorCall?
    /// The action's last result (nil before it ran).
    public var lastResult: Result<Value, RunLoopError>?
}

/// A user `CFRunLoopObserver` that writes each activity into its worker's ring.
///
/// Threads: callouts on the worker's thread; read and invalidated from any
/// thread. The callback count is `Locked`; the CF observer is set once;
/// whether it is still valid is an atomic flag (`isLive`), so the worker
/// reads it under its own lock without a CF call.
///
/// The CF observer calls a C function with this record as its info, not a
/// block: `CFRunLoopObserverInvalidate` releases an observer's info at once,
/// even while its callout runs on the loop's thread, and a block released
/// there was freed under the callout (a DELETE of an observer as it fired
/// crashed the process: a call to a freed block's code pointer). CF does
/// not own the info (no retain or release); the worker's book keeps the
/// record, and drops it only once it is invalidated, at a later insert.
// @unchecked: the CF observer, set once in init, is a thread-safe CF object.
final class ObserverRecord: @unchecked Sendable {
    let id: String
    let spec: ObserverSpec
    private(set) var observer: CFRunLoopObserver! = nil
    private let onActivity: @Sendable (ObserverRecord, Activity) -> Void
    private let fired = Locked(0)
    /// False once invalidated: by `invalidate`, or by CF after a one-shot
    /// observer's callout.
    private let live = Atomic<Bool>(true)
    private let lastResult = Locked<Result<Value, RunLoopError>?>(nil)

    /// Records the action's result.
    func recordAction(_ result: Result<Value, RunLoopError>) {
        lastResult.withLock { $0 = result }
    }

    init(id: String, spec: ObserverSpec, onActivity: @escaping @Sendable (ObserverRecord, Activity) -> Void) {
        self.id = id
        self.spec = spec
        self.onActivity = onActivity
        var context = CFRunLoopObserverContext(
            version: 0, info: Unmanaged.passUnretained(self).toOpaque(), retain: nil, release: nil,
            copyDescription: nil)
        self.observer = CFRunLoopObserverCreate(
            kCFAllocatorDefault, Activities(spec.activities).rawValue, spec.repeats, spec.order,
            { _, activity, info in
                guard let info else { return }
                Unmanaged<ObserverRecord>.fromOpaque(info).takeUnretainedValue().fire(activity)
            }, &context)
    }

    private func fire(_ activity: CFRunLoopActivity) {
        guard let which = Activity(bit: UInt(activity.rawValue)) else { return }
        fired.withLock { $0 += 1 }
        onActivity(self, which)
        // CF invalidates a one-shot observer right after this callout.
        if !spec.repeats { live.store(false, ordering: .releasing) }
    }

    func invalidate() {
        live.store(false, ordering: .releasing)
        CFRunLoopObserverInvalidate(observer)
    }

    var isValid: Bool { CFRunLoopObserverIsValid(observer) }

    /// Whether it can still be called, as this record knows it: no CF call,
    /// so it may be read under any lock.
    var isLive: Bool { live.load(ordering: .acquiring) }

    var snapshot: ObserverSnapshot {
        let valid = CFRunLoopObserverIsValid(observer)
        return ObserverSnapshot(
            id: id, activities: spec.activities, repeats: spec.repeats, mode: spec.mode.name, order: spec.order,
            valid: valid, fired: fired.withLock { $0 }, action: spec.action, lastResult: lastResult.withLock { $0 })
    }
}
