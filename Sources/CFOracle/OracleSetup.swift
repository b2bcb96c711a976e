import Foundation

/// One loop and one run of it, as the predict differential's generator makes
/// it (`Tests/RunLoopCoreTests/PredictGenerator.swift`), in plain JSON: every
/// event sits on a slot of a `quantum`-wide grid counted from the moment the
/// oracle begins building. Items are named by kind and index: timer `t0`,
/// source `s1`, perform `p2`, observer `o0`, and the performs stimuli queue
/// `x0`, `x1`, … in their order.
public struct OracleSetup: Codable, Sendable {
    /// What a callout does besides being recorded.
    public struct Action: Codable, Sendable, Equatable {
        /// `stop` (CFRunLoopStop on the loop), `runNested` (CFRunLoopRunInMode
        /// from inside the callout), `signal` (CFRunLoopSourceSignal on source
        /// `source`, then CFRunLoopWakeUp when `wakeUp`), `count` (nothing).
        public var kind: String
        public var mode: String?
        public var slots: Int?
        public var returnAfterSourceHandled: Bool?
        public var source: Int?
        public var wakeUp: Bool?

        public init(
            kind: String, mode: String? = nil, slots: Int? = nil, returnAfterSourceHandled: Bool? = nil,
            source: Int? = nil, wakeUp: Bool? = nil
        ) {
            self.kind = kind
            self.mode = mode
            self.slots = slots
            self.returnAfterSourceHandled = returnAfterSourceHandled
            self.source = source
            self.wakeUp = wakeUp
        }
    }

    public struct Timer: Codable, Sendable {
        public var modes: [String]
        public var firstSlot: Int
        public var intervalSlots: Int?
        public var maxFires: Int?
        public var invalidated: Bool
        public var action: Action?

        public init(
            modes: [String], firstSlot: Int, intervalSlots: Int?, maxFires: Int?, invalidated: Bool, action: Action?
        ) {
            self.modes = modes
            self.firstSlot = firstSlot
            self.intervalSlots = intervalSlots
            self.maxFires = maxFires
            self.invalidated = invalidated
            self.action = action
        }
    }

    public struct Source: Codable, Sendable {
        public var port: Bool
        public var modes: [String]
        public var order: Int
        public var signalled: Bool
        public var wakeUp: Bool
        /// Messages written while building (before the run).
        public var messages: Int
        /// Slots before the run's start at which one more message is written.
        public var messageSlots: [Int]
        public var action: Action?

        public init(
            port: Bool, modes: [String], order: Int, signalled: Bool, wakeUp: Bool, messages: Int,
            messageSlots: [Int] = [], action: Action?
        ) {
            self.port = port
            self.modes = modes
            self.order = order
            self.signalled = signalled
            self.wakeUp = wakeUp
            self.messages = messages
            self.messageSlots = messageSlots
            self.action = action
        }
    }

    public struct Perform: Codable, Sendable {
        public var keys: [String]
        public var delaySlot: Int?
        public var cancelled: Bool
        public var action: Action?
        /// A block (`CFRunLoopPerformBlock` for its keys, then
        /// `CFRunLoopWakeUp`) instead of the selector path's carrier.
        public var block: Bool?

        public init(keys: [String], delaySlot: Int?, cancelled: Bool, action: Action?, block: Bool? = nil) {
            self.block = block
            self.keys = keys
            self.delaySlot = delaySlot
            self.cancelled = cancelled
            self.action = action
        }
    }

    public struct Observer: Codable, Sendable {
        /// CF's activity names: entry, beforeTimers, beforeSources,
        /// beforeWaiting, afterWaiting, exit.
        public var activities: [String]
        public var repeats: Bool
        public var mode: String
        public var order: Int
        public var action: Action?

        public init(activities: [String], repeats: Bool, mode: String, order: Int, action: Action?) {
            self.activities = activities
            self.repeats = repeats
            self.mode = mode
            self.order = order
            self.action = action
        }
    }

    public struct Stimulus: Codable, Sendable {
        public var slot: Int
        /// stop, wakeUp, signal, message, invalidateSource, invalidateTimer,
        /// removeSource (source `index` from the mode `keys[0]`),
        /// invalidateObserver, perform (a block with `block`), cancelDelayed.
        public var kind: String
        public var index: Int?
        public var wakeUp: Bool?
        public var keys: [String]?
        public var stop: Bool?
        /// A `perform` stimulus that queues a block.
        public var block: Bool?

        public init(
            slot: Int, kind: String, index: Int? = nil, wakeUp: Bool? = nil, keys: [String]? = nil, stop: Bool? = nil,
            block: Bool? = nil
        ) {
            self.block = block
            self.slot = slot
            self.kind = kind
            self.index = index
            self.wakeUp = wakeUp
            self.keys = keys
            self.stop = stop
        }
    }

    public var quantum: Double
    /// port, timer or none: what keeps `default` alive (never fires in a run).
    public var keepAlive: String
    public var runMode: String
    public var trackingIsCommon: Bool
    /// The slot the run starts at (0: as soon as it is built).
    public var startSlot: Int
    /// The run's deadline slot; 0: a run of 0 seconds.
    public var deadlineSlot: Int
    public var returnAfterSourceHandled: Bool
    /// Played nested: a perform in mode `nest-host` runs it, then stops the host run.
    public var nested: Bool
    public var timers: [Timer]
    public var sources: [Source]
    public var performs: [Perform]
    public var observers: [Observer]
    public var stimuli: [Stimulus]

    public init(
        quantum: Double, keepAlive: String, runMode: String, trackingIsCommon: Bool, startSlot: Int,
        deadlineSlot: Int, returnAfterSourceHandled: Bool, nested: Bool, timers: [Timer], sources: [Source],
        performs: [Perform], observers: [Observer], stimuli: [Stimulus]
    ) {
        self.quantum = quantum
        self.keepAlive = keepAlive
        self.runMode = runMode
        self.trackingIsCommon = trackingIsCommon
        self.startSlot = startSlot
        self.deadlineSlot = deadlineSlot
        self.returnAfterSourceHandled = returnAfterSourceHandled
        self.nested = nested
        self.timers = timers
        self.sources = sources
        self.performs = performs
        self.observers = observers
        self.stimuli = stimuli
    }
}

/// What plain CF did with one setup.
public struct OracleResult: Codable, Sendable, Equatable {
    public struct Turn: Codable, Sendable, Equatable {
        /// What woke the loop: `none` (the run's first turn), `timer t0`,
        /// `source s1`, `port s2`, `perform p0`, `wakeup`, `timeout`.
        public var wokeBy: String
        /// Every callout, in order: `observer o0`, `timer t1`, …
        public var callouts: [String]
        /// `sleep` or `exit`.
        public var end: String

        public init(wokeBy: String, callouts: [String], end: String) {
            self.wokeBy = wokeBy
            self.callouts = callouts
            self.end = end
        }
    }

    public struct Run: Codable, Sendable, Equatable {
        /// finished, stopped, timedOut, handledSource.
        public var exitReason: String
        /// Who stopped it: `outside`, or the callout whose stop did (`timer t0`).
        public var stopper: String?
        /// The sources and performs handled since the loop last woke (or the
        /// run began): with returnAfterSourceHandled, the pass that ended it.
        public var handled: [String]
        public var turns: [Turn]
        /// Milliseconds from the run's start to its return.
        public var ms: Double

        public init(exitReason: String, stopper: String? = nil, handled: [String], turns: [Turn], ms: Double) {
            self.exitReason = exitReason
            self.stopper = stopper
            self.handled = handled
            self.turns = turns
            self.ms = ms
        }
    }

    /// The run asked for.
    public var run: Run
    /// The runs its callouts started, in the order they returned.
    public var nested: [Run]
    /// How late the oracle itself was (a stimulus, the start, a wake) past
    /// its slot, ms: over a few ms the setup was not played as planned.
    public var lateMs: Double
}
