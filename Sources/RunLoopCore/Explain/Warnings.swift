import Foundation
import Primitives

/// A warning about a loop: one of the classic mistakes (a signal without a
/// wake-up, work waiting in a mode that never runs, …) or a stall.
public struct LoopWarning: Sendable, Hashable {
    /// A `WarningCode`'s raw value (`lost_wakeup`, `stall`, …): the wire text.
    public var code: String
    /// `info`, `warning`, or for a stall its severity (`micro`, `hang`, `severe`).
    public var severity: String
    /// The thread it is about.
    public var thread: String
    /// The objects involved (timer, source, perform ids, a mode).
    public var subjects: [String]
    /// One sentence.
    public var message: String
    /// Numbers and names behind the message (`mode`, `skipped`, `ms`, …).
    public var details: [String: Value]
    /// When it first appeared.
    public var firstAt: Date
    /// When it was last seen.
    public var lastAt: Date
    /// How many times it was seen.
    public var count: Int
    /// Whether the condition holds now.
    public var active: Bool
}

/// The bounded table of warnings of one registry.
///
/// Threads: raised and resolved from workers' threads, the watchdog and
/// deadline checks; read from any thread. One `Locked`; events go out after
/// it is released, and a caller's filter runs outside it.
public final class WarningTable: Sendable {
    private struct Key: Hashable {
        var code: String
        var thread: String
        var subject: String
    }
    private struct Table {
        var warnings: [Key: LoopWarning] = [:]
        var order: [Key] = []
        /// Each thread's keys, oldest first: a thread's warnings are read
        /// without walking everyone's (`GET /api/threads` reads them per thread).
        var byThread: [String: [Key]] = [:]

        /// Forgets `key` (already out of `order`).
        mutating func drop(_ key: Key) {
            warnings[key] = nil
            byThread[key.thread]?.removeAll { $0 == key }
            if byThread[key.thread]?.isEmpty == true { byThread[key.thread] = nil }
        }
    }
    private let table = Locked(Table())
    private let capacity: Int
    private let emit: @Sendable (RunLoopEvent) -> Void

    init(capacity: Int, emit: @escaping @Sendable (RunLoopEvent) -> Void) {
        self.capacity = max(1, capacity)
        self.emit = emit
    }

    /// Raises (or sees again) a warning. An event goes out when it becomes
    /// active or changes severity; seeing an active one again only counts.
    /// `counts` false: the same occurrence seen again (a stall escalating), not a new one.
    public func raise(
        _ code: WarningCode, severity: String, thread: String, subjects: [String], message: String,
        details: [String: Value] = [:], counts: Bool = true
    ) {
        let key = Key(code: code.rawValue, thread: thread, subject: subjects.joined(separator: ","))
        let now = Date()
        let changed: LoopWarning? = table.withLock { t in
            if var existing = t.warnings[key] {
                let news = !existing.active || existing.severity != severity
                if counts || !existing.active { existing.count += 1 }
                existing.lastAt = now
                existing.active = true
                existing.severity = severity
                existing.message = message
                existing.details = details
                t.warnings[key] = existing
                return news ? existing : nil
            }
            let warning = LoopWarning(
                code: code.rawValue, severity: severity, thread: thread, subjects: subjects, message: message,
                details: details,
                firstAt: now, lastAt: now, count: 1, active: true)
            t.warnings[key] = warning
            t.order.append(key)
            t.byThread[thread, default: []].append(key)
            if t.order.count > capacity {
                // Forget the oldest inactive warning (the oldest of all when every one is active).
                let index = t.order.firstIndex { t.warnings[$0]?.active == false } ?? 0
                t.drop(t.order.remove(at: index))
            }
            return warning
        }
        if let changed { emit(.warning(changed)) }
    }

    /// Marks matching active warnings inactive (`subject` nil: any subject;
    /// `where` filters on the warning). `matches` is the caller's code, so it
    /// runs between two holds of the lock, never under it: the candidates are
    /// copied out, filtered, and resolved under the lock again only if they
    /// did not change meanwhile (one raised again in between is judged again).
    @discardableResult
    public func resolve(
        _ code: WarningCode? = nil, thread: String, subject: String? = nil,
        where matches: (LoopWarning) -> Bool = { _ in true }
    ) -> [LoopWarning] {
        var resolved: [LoopWarning] = []
        while true {
            let candidates: [(Key, LoopWarning)] = table.withLock { t in
                (t.byThread[thread] ?? []).compactMap { key in
                    guard code == nil || key.code == code?.rawValue,
                        subject == nil || key.subject == subject, let warning = t.warnings[key], warning.active
                    else { return nil }
                    return (key, warning)
                }
            }
            let chosen = candidates.filter { matches($0.1) }
            guard !chosen.isEmpty else { break }
            let (done, changed) = table.withLock { t -> ([LoopWarning], Bool) in
                var done: [LoopWarning] = []
                var changed = false
                for (key, seen) in chosen {
                    guard var warning = t.warnings[key] else { continue }  // forgotten meanwhile
                    guard warning == seen else {
                        changed = true
                        continue
                    }
                    warning.active = false
                    t.warnings[key] = warning
                    done.append(warning)
                }
                return (done, changed)
            }
            resolved += done
            if !changed { break }
        }
        for warning in resolved { emit(.warning(warning)) }
        return resolved
    }

    /// Warnings, oldest first, filtered.
    public func list(thread: String? = nil, code: WarningCode? = nil, active: Bool? = nil) -> [LoopWarning] {
        table.withLock { t in
            (thread.map { t.byThread[$0] ?? [] } ?? t.order).compactMap { key -> LoopWarning? in
                guard code == nil || key.code == code?.rawValue,
                    let warning = t.warnings[key], active == nil || warning.active == active
                else { return nil }
                return warning
            }
        }
    }

    /// Active warnings per code (for metrics).
    public func activeCounts() -> [String: Int] {
        table.withLock { t in
            var counts: [String: Int] = [:]
            for warning in t.warnings.values where warning.active { counts[warning.code, default: 0] += 1 }
            return counts
        }
    }
}
