#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Why a run ended, beyond CF's four results: a stable `code`, one sentence
/// for people, and the objects involved (`details`: ids, seconds, counts).
///
/// Precedence follows CF's own order of checks at the end of a pass
/// (`handledSource`, then `timedOut`, then `stopped`, then `finished`): the
/// cause always explains the `ExitReason` CF returned, never a guess at
/// another one.
public struct ExitCause: Sendable, Hashable {
    /// `source_handled`, `deadline`, `stop_request`, `stop_selector`,
    /// `thread_ending`, `service_stopping`, `mode_empty`, `mode_missing`.
    public var code: String
    /// One sentence.
    public var message: String
    /// The objects involved (`source`, `perform`, `seconds`, `timerFires`,
    /// `by`, `requestId`, `mode`, `emptiedBy`, `atEntry`, `handled`,
    /// `didYouMean`).
    public var details: [String: Value]

    /// Creates a cause.
    public init(code: String, message: String, details: [String: Value] = [:]) {
        self.code = code
        self.message = message
        self.details = details
    }
}

/// Who asked a run to stop, kept with the run until it returns.
public enum StopOrigin: Sendable, Hashable {
    /// A request from outside the loop, e.g. `POST /api/threads/t2/stop`
    /// (`by`), with its request id when it has one.
    case request(by: String, requestId: String?)
    /// The `stop` selector, run by a callout of the loop itself (a perform,
    /// a timer's or a source's action, a task).
    case selector(callout: CalloutRef?)
    /// The worker is ending (`DELETE /api/threads/{id}` or `Worker.end`).
    case threadEnding
    /// The whole service is stopping.
    case serviceStopping

    /// The exit-cause code a run stopped this way gets (`stop_request`,
    /// `stop_selector`, `thread_ending`, `service_stopping`).
    public var code: String { ExitCause.stop(self).code }
}

/// What emptied a mode: the last item whose removal left it without sources
/// or timers.
package struct Removal: Sendable, Hashable {
    package var kind: String
    package var id: String
    package var how: String
    package var mono: Double

    package init(kind: String, id: String, how: String, mono: Double) {
        self.kind = kind
        self.id = id
        self.how = how
        self.mono = mono
    }
}

extension ExitCause {
    /// `source_handled`: `callout` is the last source handled (the single
    /// fields, kept for compatibility); `pass` every source and perform
    /// handled in the pass that ended the run, in order (`handled`), `more`
    /// those beyond the list's bound.
    package static func sourceHandled(_ callout: CalloutRef?, pass: [CalloutRef] = [], more: Int = 0) -> ExitCause {
        var cause = sourceHandled(callout)
        guard !pass.isEmpty else { return cause }
        cause.details["handled"] = .array(
            pass.map { ref in
                var item: [String: Value] = ["kind": .string(ref.kind.rawValue), "id": .string(ref.id)]
                if let selector = ref.selector { item["selector"] = .string(selector) }
                return .object(item)
            })
        if more > 0 { cause.details["handledMore"] = .number(Double(more)) }
        let total = pass.count + more
        guard total > 1 else { return cause }
        let names =
            pass.map { "\($0.kind.rawValue) \($0.id)" }.joined(separator: ", ") + (more > 0 ? " and \(more) more" : "")
        cause.message =
            "the pass that ended the run handled \(total) sources and performs (\(names)): "
            + "the run was asked to return after a handled source, and CF returns only once the pass is over "
            + "(\(passRule(pass)))"
        return cause
    }

    /// Why one `returnAfterSourceHandled` pass handled several callouts, from
    /// what it handled: CF's `__CFRunLoopDoSources0` stops after the first
    /// custom source when asked to return after one, so any other signalled
    /// custom source waits for the next run; a mode's queued performs share
    /// that mode's one custom source and all go in its callout; a port
    /// message is read after the custom sources, in the same pass.
    package static func passRule(_ pass: [CalloutRef]) -> String {
        let performs = pass.filter { $0.kind == .perform }.count
        let ports = pass.filter { $0.kind == .port }.count
        var parts = [
            "CF handles one signalled custom source per pass when asked to return after one, "
                + "and any other stays signalled for the next run"
        ]
        if performs > 1 {
            parts.append("the \(performs) performs were queued in their mode's one perform source, which runs them all")
        }
        if ports > 0 {
            parts.append("a port message is read after the custom source, in the same pass")
        }
        return parts.joined(separator: "; ")
    }

    package static func sourceHandled(_ callout: CalloutRef?) -> ExitCause {
        guard let callout else {
            return ExitCause(
                code: "source_handled", message: "a source was handled and the run was asked to return after one")
        }
        var details: [String: Value] = ["source": .string(callout.id), "kind": .string(callout.kind.rawValue)]
        var message = "source \(callout.id) was handled and the run was asked to return after one"
        if callout.kind == .perform {
            details["perform"] = .string(callout.id)
            details["source"] = .string("perform:\(callout.id)")
            message =
                "perform \(callout.id) ran through its mode's custom source, which counts as a handled source; "
                + "the run was asked to return after one"
        }
        return ExitCause(code: "source_handled", message: message, details: details)
    }

    package static func deadline(seconds: Double, timerFires: Int) -> ExitCause {
        var message = "the run's \(Self.seconds(seconds)) passed"
        if timerFires > 0 {
            message +=
                "; \(timerFires) timer fire\(timerFires == 1 ? "" : "s") ran meanwhile, "
                + "and timers never count as handled sources"
        }
        return ExitCause(
            code: "deadline", message: message,
            details: ["seconds": .number(seconds), "timerFires": .number(Double(timerFires))])
    }

    package static func stop(_ origin: StopOrigin?) -> ExitCause {
        switch origin {
        case .request(let by, let requestId)?:
            var details: [String: Value] = ["by": .string(by)]
            if let requestId { details["requestId"] = .string(requestId) }
            return ExitCause(code: "stop_request", message: "\(by) called CFRunLoopStop", details: details)
        case .selector(let callout)?:
            var details: [String: Value] = [:]
            var message = "the stop selector called CFRunLoopStop from inside the loop"
            if let callout {
                details["by"] = ["kind": .string(callout.kind.rawValue), "id": .string(callout.id)]
                if callout.kind == .perform { details["perform"] = .string(callout.id) }
                message = "the stop selector, run by \(callout.kind.rawValue) \(callout.id), called CFRunLoopStop"
            }
            return ExitCause(code: "stop_selector", message: message, details: details)
        case .threadEnding?:
            return ExitCause(code: "thread_ending", message: "the thread is ending: its runs are stopped")
        case .serviceStopping?:
            return ExitCause(code: "service_stopping", message: "the service is stopping: every run is stopped")
        case nil:
            return ExitCause(code: "stop_request", message: "CFRunLoopStop was called on the loop")
        }
    }

    package static func modeEmpty(_ mode: String, emptiedBy: Removal?) -> ExitCause {
        guard let emptiedBy else {
            return ExitCause(
                code: "mode_empty",
                message: "mode \(mode) had no sources or timers when the run began, so CF returned at once",
                details: ["mode": .string(mode), "atEntry": .bool(true)])
        }
        return ExitCause(
            code: "mode_empty",
            message: "mode \(mode) became empty: \(emptiedBy.kind) \(emptiedBy.id) \(emptiedBy.how)",
            details: [
                "mode": .string(mode), "atEntry": .bool(false),
                "emptiedBy": [
                    "kind": .string(emptiedBy.kind), "id": .string(emptiedBy.id), "how": .string(emptiedBy.how),
                ],
            ])
    }

    package static func modeMissing(_ mode: String) -> ExitCause {
        ExitCause(
            code: "mode_missing",
            message:
                "nothing (no source, timer or perform) was ever added to mode \(mode), so CF returned at once: observers alone never keep a mode alive",
            details: ["mode": .string(mode)])
    }

    /// A `finished` cause in a mode named close to a known one gets the hint
    /// ("did you mean default?") and `details.didYouMean`.
    package func hinting(_ modeName: String) -> ExitCause {
        guard let mode = try? RunLoopMode(modeName), let suggestion = mode.suggestion else { return self }
        var cause = self
        cause.message +=
            "; did you mean \(suggestion)? (\(modeName) is a custom mode of its own, not CF's \(suggestion))"
        cause.details["didYouMean"] = .string(suggestion)
        return cause
    }

    package static func seconds(_ value: Double) -> String {
        if value >= 1e9 { return "unbounded wait" }
        let text = value.rounded() == value ? String(Int(value)) : printfG(value)
        return "\(text) s"
    }

    /// `value` as C's `%g` writes it (six significant digits), without
    /// Foundation's `String(format:)`.
    static func printfG(_ value: Double) -> String {
        let size = 32
        var buffer = [CChar](repeating: 0, count: size)
        _ = withVaList([value]) { vsnprintf(&buffer, size, "%g", $0) }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
