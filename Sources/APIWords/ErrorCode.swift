/// Every error code runloopd answers with: the one typed list. An error
/// answer's `error.code` (`RunLoopError`, `HTTPRefusal`, the API's own
/// refusals) is made only from a case here; the build writes this list into
/// openapi.json's `ErrorBody.code` enum (`OpenAPIEnums`), and
/// `ErrorCodeTests` holds it against docs/api.md's Errors table, both ways.
/// A new code: a case here (its raw value is the wire text), then its row in
/// the table (ARCHITECTURE.md, "Where to add").
///
/// In `APIWords`, which `Primitives` re-exports, because every layer answers
/// with these words: the HTTP layer's own refusals (`MicroHTTP`), the
/// engine's errors (`RunLoopCore`) and the API's (`RunLoopServer`); and the
/// build tool that fills openapi.json links it.
public enum ErrorCode: String, CaseIterable, Sendable, Hashable {
    // 400: the request is malformed.
    case badJSON = "bad_json"
    case unknownField = "unknown_field"
    case badValue = "bad_value"
    case unknownSelector = "unknown_selector"
    case ambiguousFraming = "ambiguous_framing"
    case conflictingContentLength = "conflicting_content_length"
    case badHost = "bad_host"
    // 401, 403.
    case unauthorized
    case readOnly = "read_only"
    case forbiddenOrigin = "forbidden_origin"
    // 404, 405.
    case notFound = "not_found"
    case storeDisabled = "store_disabled"
    case noCapture = "no_capture"
    case methodNotAllowed = "method_not_allowed"
    // 409: the request conflicts with the current state.
    case notRunning = "not_running"
    case stopDropped = "stop_dropped"
    case alreadyRunning = "already_running"
    case notManual = "not_manual"
    case threadExited = "thread_exited"
    case threadEnded = "thread_ended"
    case threadEnding = "thread_ending"
    case wrongKind = "wrong_kind"
    case wrongThread = "wrong_thread"
    case sourceInvalid = "source_invalid"
    case timerInvalid = "timer_invalid"
    case notInMode = "not_in_mode"
    case taskExists = "task_exists"
    case taskRunning = "task_running"
    case instanceRunning = "instance_running"
    case cancelled
    // 413, 414, 415, 421, 422, 431.
    case payloadTooLarge = "payload_too_large"
    case tooManyParameters = "too_many_parameters"
    case tooManyHeaders = "too_many_headers"
    case unsupportedMediaType = "unsupported_media_type"
    case misdirectedHost = "misdirected_host"
    case selectorFailed = "selector_failed"
    // 429: a limit or a loop budget.
    case tooManyThreads = "too_many_threads"
    case tooManyTimers = "too_many_timers"
    case tooManySources = "too_many_sources"
    case tooManyObservers = "too_many_observers"
    case tooManyClients = "too_many_clients"
    case tooManyClientsPerIP = "too_many_clients_per_ip"
    case queueFull = "queue_full"
    case threadCreateFailed = "thread_create_failed"
    case noDescriptors = "no_descriptors"
    case nestingLimit = "nesting_limit"
    case livelock
    // 500: a fault of runloopd's own (never from input).
    case `internal`
    case noRegistry = "no_registry"
    // 503: not now.
    case notReady = "not_ready"
    case shuttingDown = "shutting_down"
    case overloaded
    case storeUnavailable = "store_unavailable"
    case answersOverBudget = "answers_over_budget"
    // 504: runloopd could not answer in time.
    case deadlineExceeded = "deadline_exceeded"
    case waitPassed = "wait_passed"
}
