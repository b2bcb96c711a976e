/// A worker's loop as the predictor sees it: plain values, read once (as
/// `Worker.why()` reads), with every time in seconds from the moment it
/// was read. Modes are expanded: an item in `common` lists every common mode.
public struct LoopModel: Sendable {
    /// The run a callout starts (the `runNested` selector): its mode,
    /// seconds and flag, as its arguments say.
    public struct NestedRun: Sendable, Hashable {
        public var mode: String
        public var seconds: Double
        public var returnAfterSourceHandled: Bool

        public init(mode: String, seconds: Double, returnAfterSourceHandled: Bool) {
            self.mode = mode
            self.seconds = seconds
            self.returnAfterSourceHandled = returnAfterSourceHandled
        }

        /// The run `call` starts, if it is a `runNested` that can start one
        /// (`common` is refused: a run is in one mode).
        public init?(_ call: SelectorCall?) {
            guard let call, call.selector == "runNested" else { return nil }
            let mode = call.args["mode"]?.string ?? "default"
            let seconds = call.args["seconds"]?.number ?? -1
            guard mode != "common", seconds >= 0, seconds.isFinite else { return nil }
            self.init(
                mode: mode, seconds: seconds,
                returnAfterSourceHandled: call.args["returnAfterSourceHandled"]?.bool ?? false)
        }
    }

    /// A timer (a user's, the keep-alive, or a delayed perform's one-shot).
    public struct Timer: Sendable {
        public var id: String
        /// The mode names it was added to, as recorded (`common` kept).
        public var modeNames: [String]
        /// Every mode it is in (common expanded).
        public var modes: Set<String>
        /// Seconds until its next fire (negative: already due).
        public var next: Double
        /// Seconds between fires; nil for a one-shot timer.
        public var interval: Double?
        /// Fires so far, and the limit (`maxFires`).
        public var fires: Int
        public var maxFires: Int?
        public var role: ItemRole
        /// The selector its fire runs (a delayed perform's selector).
        public var selector: String?
        /// A delayed perform's timer: its fire is the perform's callout.
        public var perform: Bool
        /// The run its fire starts (a `runNested` action), if any.
        public var nested: NestedRun?
        public var valid = true
        /// Inside its own callout: CF keeps it in its modes (the mode is not
        /// empty) but neither fires it nor arms the timerfd for it.
        var firing = false

        public init(
            id: String, modeNames: [String], modes: Set<String>, next: Double, interval: Double?, fires: Int = 0,
            maxFires: Int? = nil, role: ItemRole = .user, selector: String? = nil, perform: Bool = false,
            nested: NestedRun? = nil
        ) {
            self.nested = nested
            self.id = id
            self.modeNames = modeNames
            self.modes = modes
            self.next = next
            self.interval = interval
            self.fires = fires
            self.maxFires = maxFires
            self.role = role
            self.selector = selector
            self.perform = perform
        }
    }

    /// A custom (version-0) or port (version-1) source.
    public struct Source: Sendable {
        public var id: String
        public var port: Bool
        public var modeNames: [String]
        public var modes: Set<String>
        public var order: Int
        public var signalled: Bool
        /// Port messages queued, not yet handled.
        public var queued: Int
        /// Since when its descriptor is readable (seconds from the read; the
        /// oldest queued message's sending), if known.
        public var readySince: Double?
        public var selector: String?
        public var role: ItemRole
        /// The run its callout starts (a `runNested` action), if any.
        public var nested: NestedRun?
        public var valid = true

        public init(
            id: String, port: Bool, modeNames: [String], modes: Set<String>, order: Int = 0, signalled: Bool = false,
            queued: Int = 0, selector: String? = nil, role: ItemRole = .user, nested: NestedRun? = nil,
            readySince: Double? = nil
        ) {
            self.readySince = readySince
            self.nested = nested
            self.id = id
            self.port = port
            self.modeNames = modeNames
            self.modes = modes
            self.order = order
            self.signalled = signalled
            self.queued = queued
            self.selector = selector
            self.role = role
        }
    }

    /// A queued (not delayed) perform, in queue order.
    public struct Perform: Sendable {
        public var id: String
        /// Its mode names as given (`common` kept): one carrier source each.
        public var keys: [String]
        public var selector: String
        /// The run it starts (`runNested`), if any.
        public var nested: NestedRun?

        public init(id: String, keys: [String], selector: String, nested: NestedRun? = nil) {
            self.nested = nested
            self.id = id
            self.keys = keys
            self.selector = selector
        }
    }

    /// A user observer.
    public struct Observer: Sendable {
        public var id: String
        public var activities: Set<Activity>
        public var repeats: Bool
        public var modes: Set<String>
        public var order: Int
        public var selector: String?
        /// A `signal` action: the custom source it signals, and whether it
        /// wakes the loop too.
        public var signals: (source: String, wakeUp: Bool)?
        /// The run its callout starts (a `runNested` action), if any.
        public var nested: NestedRun?
        /// Its callout is under way: CF skips a firing observer.
        var firing = false
        public var valid = true

        public init(
            id: String, activities: Set<Activity>, repeats: Bool, modes: Set<String>, order: Int,
            selector: String? = nil, signals: (source: String, wakeUp: Bool)? = nil, nested: NestedRun? = nil
        ) {
            self.nested = nested
            self.signals = signals
            self.id = id
            self.activities = activities
            self.repeats = repeats
            self.modes = modes
            self.order = order
            self.selector = selector
        }
    }

    public var commonModes: [String]
    public var timers: [Timer]
    public var sources: [Source]
    public var performs: [Perform]
    /// Block performs in CF's block list (`CFRunLoopPerformBlock`), in queue
    /// order: no carrier; each keeps its modes from being empty until it runs.
    public var blocks: [Perform] = []
    public var observers: [Observer]
    /// Its timers, sources and observers: what one pass of a play looks at.
    var itemCount: Int { timers.count + sources.count + observers.count }
    /// Modes anything was ever added to (`common` expanded).
    public var everFilled: Set<String>
    /// Runs under way (innermost last): the predicted run would be nested.
    public var depth: Int
    /// Per mode: seconds until (negative: since) the date its timerfd stays
    /// armed at although no timer is left there (CF on Linux never disarms it).
    public var staleTimerfd: [String: Double] = [:]

    public init(
        commonModes: [String] = ["default"], timers: [Timer] = [], sources: [Source] = [], performs: [Perform] = [],
        observers: [Observer] = [], everFilled: Set<String> = [], depth: Int = 0
    ) {
        self.commonModes = commonModes
        self.timers = timers
        self.sources = sources
        self.performs = performs
        self.observers = observers
        self.everFilled = everFilled
        self.depth = depth
    }

    /// `names` with `common` replaced by the common modes.
    public func expand(_ names: [String]) -> Set<String> {
        var out = Set<String>()
        for name in names {
            if name == "common" { out.formUnion(commonModes) } else { out.insert(name) }
        }
        return out
    }
}

/// Something that happens to a loop from outside during a predicted run, at
/// a time from the moment the model was read: the predictor cannot know
/// these by itself (a stop, a wake-up, a signal, a message); a test that
/// will cause them says so, and the prediction takes them into account.
public struct Stimulus: Sendable {
    public enum Kind: Sendable {
        /// `CFRunLoopStop` (it also wakes the loop).
        case stop(StopOrigin)
        /// `CFRunLoopWakeUp`.
        case wakeUp
        /// `CFRunLoopSourceSignal`, with or without a wake-up.
        case signal(source: String, wakeUp: Bool)
        /// A message written to a port source.
        case message(source: String)
        /// `CFRunLoopSourceInvalidate` (never wakes the loop unless asked).
        case invalidateSource(String, wakeUp: Bool)
        /// `CFRunLoopTimerInvalidate`.
        case invalidateTimer(String, wakeUp: Bool)
        /// `CFRunLoopRemoveSource` from one mode (by name; never wakes the loop unless asked).
        case removeSourceMode(String, mode: String, wakeUp: Bool)
        /// `CFRunLoopObserverInvalidate`.
        case invalidateObserver(String)
        /// A perform queued now (`performSelector:onThread:`): signal + wake-up.
        case perform(LoopModel.Perform)
        /// A block perform queued now (`CFRunLoopPerformBlock` + `CFRunLoopWakeUp`).
        case performBlock(LoopModel.Perform)
        /// `cancelPreviousPerformRequests` matching these delayed performs.
        case cancelDelayed(ids: [String])
    }
    public var at: Double
    public var kind: Kind

    public init(at: Double, _ kind: Kind) {
        self.at = at
        self.kind = kind
    }
}
