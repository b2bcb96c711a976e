import CoreFoundation
import Foundation
import Primitives

// What the explainer asks of a worker's book: where a perform lands, a
// mode set expanded, a run's exit cause, and what a mode holds.

/// Where a queued perform landed (see `WorkerBook.placement`).
enum PerformPlacement {
    case idle
    case runningInMode
    case runningElsewhere
}

extension WorkerBook {
    /// Where a perform for `modes` lands: on a loop that is not running, on
    /// a run in one of its modes (the usual case: nothing to watch), or on a
    /// run in another mode. No allocation on the usual path.
    func placement(of modes: [RunLoopMode]) -> PerformPlacement {
        guard let current = runStack.last?.mode else { return .idle }
        let inMode = modes.contains { $0.name == current || ($0.isCommon && commonModes.contains(current)) }
        return inMode ? .runningInMode : .runningElsewhere
    }

    /// `modes` with `common` replaced by the common modes.
    func expand(_ modes: [String]) -> [String] {
        var out: [String] = []
        for mode in modes {
            for name in mode == "common" ? commonModes : [mode] where !out.contains(name) { out.append(name) }
        }
        return out
    }

    /// What the loop holds, copied out for questions asked after the lock.
    var contents: LoopContents {
        LoopContents(timers: timers.all, sources: sources.all, performs: performs.queued, commonModes: commonModes)
    }

    /// The cause of a run's exit, by CF's precedence.
    func cause(
        of reason: ExitReason, frame: RunFrame, summary: LoopTracer.RunSummary, cancelled: Bool, since: Double
    ) -> ExitCause {
        switch reason {
        case .handledSource:
            return .sourceHandled(
                summary.lastSource, pass: summary.passSources, more: summary.passSourcesDropped)
        case .timedOut:
            return .deadline(seconds: frame.seconds, timerFires: summary.timerFires)
        case .stopped:
            if cancelled, let endOrigin { return .stop(endOrigin) }
            return .stop(frame.stopOrigin ?? summary.stopBy)
        case .finished:
            let filled =
                everFilled.contains(frame.mode) || (everFilled.contains("common") && commonModes.contains(frame.mode))
            let cause: ExitCause
            if filled {
                let removal = lastRemoval[frame.mode].flatMap { $0.mono >= since ? $0 : nil }
                cause = .modeEmpty(frame.mode, emptiedBy: removal)
            } else {
                cause = .modeMissing(frame.mode)
            }
            return cause.hinting(frame.mode)
        }
    }

    /// Records what may have emptied `mode` (`common`: every common mode).
    mutating func removed(_ kind: String, _ id: String, how: String, from mode: String) {
        let removal = Removal(kind: kind, id: id, how: how, mono: Monotonic.now())
        for name in expand([mode]) { lastRemoval[name] = removal }
    }

    /// Something was added to `mode`.
    mutating func filled(_ mode: String) { everFilled.insert(mode) }
}

/// What a loop holds, copied out of the book (references and names only):
/// its questions ask the records themselves (CF validity, each record's
/// modes behind their own lock), so they are asked after the book's lock.
struct LoopContents {
    var timers: [TimerRecord]
    var sources: [UserSource]
    var performs: [PerformRequest]
    var commonModes: [String]

    /// Whether the keep-alive port is in `mode`.
    func holdsKeepAlivePort(in mode: String) -> Bool {
        sources.contains { $0.spec.role == .keepAlive && $0.isValid && $0.isIn(mode, common: commonModes) }
    }

    /// Whether `mode` holds nothing that keeps a run in it from finishing
    /// (no valid source, keep-alive included, no valid timer, no perform).
    func isEmpty(_ mode: String) -> Bool {
        let inMode: (String) -> Bool = { $0 == mode || ($0 == "common" && commonModes.contains(mode)) }
        if timers.contains(where: { $0.isValid && $0.isIn(mode, common: commonModes) }) { return false }
        if sources.contains(where: { $0.isValid && $0.isIn(mode, common: commonModes) }) { return false }
        return !performs.contains { $0.modes.contains { inMode($0.name) } }
    }

    /// Whether `mode` holds a timer, a user source or a perform (the things
    /// that can wake a loop besides a stop or a wake-up).
    func hasWakeableItems(in mode: String) -> Bool {
        let inMode: (String) -> Bool = { $0 == mode || ($0 == "common" && commonModes.contains(mode)) }
        if timers.contains(where: { $0.isValid && $0.isIn(mode, common: commonModes) }) { return true }
        if sources.contains(where: { $0.isValid && $0.spec.role == .user && $0.isIn(mode, common: commonModes) }) {
            return true
        }
        return performs.contains { $0.modes.contains { inMode($0.name) } }
    }
}
