import CoreFoundation
import Foundation
import Primitives

/// The explainer on a worker: raising and resolving its warnings, and the
/// delayed checks that raise them.
extension Worker {
    // MARK: - Warnings

    /// Raises a warning about this worker.
    func warn(
        _ code: WarningCode, severity: String, subjects: [String], message: String, details: [String: Value] = [:]
    ) {
        let key = Self.warningKey(code.rawValue, subjects)
        openWarnings.withLock { keys in
            keys.insert(key)
            warned.store(keys.count, ordering: .relaxed)
        }
        diagnostics.warnings.raise(
            code, severity: severity, thread: id, subjects: subjects, message: message, details: details)
    }

    /// Resolves this worker's warning `code` about `subject` (any subject when
    /// nil). Free when the worker has no open warning; a set lookup otherwise.
    func unwarn(_ code: WarningCode, subject: String? = nil) {
        guard warned.load(ordering: .relaxed) > 0 else { return }
        let open = openWarnings.withLock { keys -> Bool in
            let matching =
                subject.map {
                    keys.contains(Self.warningKey(code.rawValue, [$0])) ? [Self.warningKey(code.rawValue, [$0])] : []
                }
                ?? keys.filter { $0.hasPrefix(code.rawValue + "|") }
            guard !matching.isEmpty else { return false }
            keys.subtract(matching)
            warned.store(keys.count, ordering: .relaxed)
            return true
        }
        if open { diagnostics.warnings.resolve(code, thread: id, subject: subject) }
    }

    func forget(_ keys: [String]) {
        guard !keys.isEmpty else { return }
        openWarnings.withLock { open in
            open.subtract(keys)
            warned.store(open.count, ordering: .relaxed)
        }
    }

    static func warningKey(_ code: String, _ subjects: [String]) -> String {
        code + "|" + subjects.joined(separator: ",")
    }

    /// Checks `check` after `seconds` (on a background queue), if the worker lives.
    func later(_ seconds: Double, _ check: @escaping @Sendable (Worker) -> Void) {
        Deadlines.after(seconds) { [weak self] in
            guard let self, !self.hasExited else { return }
            check(self)
        }
    }

    /// A mode named close to one of CF's (`NSDefaultRunloopMode`, `defualt`):
    /// `mode_misnamed`, once per mode, so the hint is seen wherever the name
    /// was used (an item added, a perform queued, a run).
    func noteMode(_ mode: RunLoopMode) {
        guard let suggestion = mode.suggestion, let hint = mode.hint else { return }
        warn(
            .modeMisnamed, severity: "warning", subjects: [mode.name], message: hint,
            details: ["mode": .string(mode.name), "didYouMean": .string(suggestion)])
    }

    /// Schedules the `mode_never_runs` check for work waiting in `modes` (a
    /// signalled source, a queued perform, a timer due in `dueIn` seconds):
    /// `stillWaiting` tells, at the check, whether the work still waits.
    func watchModes(
        _ modes: [String], item: String, kind: String, dueIn: Double = 0,
        stillWaiting: @escaping @Sendable (Worker) -> Bool
    ) {
        let after = diagnostics.options.modeNeverRunsAfter
        let added = Monotonic.now()
        let running = book.withLock { b -> Bool in
            guard let current = b.runStack.last?.mode else { return false }
            return b.expand(modes).contains(current)
        }
        guard !running else { return }
        let waited = max(0, dueIn) + after
        let manual = policy.style == .manual
        @Sendable func check(_ worker: Worker) {
            guard stillWaiting(worker) else { return }
            let (expanded, ran, parked) = worker.book.withLock { b -> ([String], Bool, Bool) in
                let expanded = b.expand(modes)
                let ran = expanded.contains { (b.modeEntered[$0] ?? -1) >= added || b.runStack.last?.mode == $0 }
                // A manual thread nobody asks to run is not a loop stuck in
                // another mode (/why says it runs only when asked, issue 39):
                // the check waits for its next run and counts from there.
                let park = !ran && manual && b.runStack.isEmpty
                if park { b.parkedModeChecks.append(check) }
                return (expanded, ran, park)
            }
            guard !ran, !parked, let mode = expanded.first else { return }
            worker.warn(
                .modeNeverRuns, severity: "warning", subjects: [item],
                message:
                    "\(kind) \(item) waits in \(expanded.joined(separator: ", ")), which \(worker.id) has not run for \(ExitCause.seconds(waited)); it runs only when the loop runs in one of those modes",
                details: ["mode": .string(mode), "modes": .array(expanded.map(Value.string))])
        }
        later(waited, check)
    }
}
