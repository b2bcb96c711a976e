/// Every warning code runloopd raises: the one typed list. A warning is
/// raised and resolved only by a case here (`WarningTable.raise`,
/// `Worker.warn`), metrics count each case from the start, and the build
/// writes this list into openapi.json's `Warning.code` and
/// `GET /api/warnings` `?code=` enums (`OpenAPIEnums`); `APIWordsTests`
/// holds it against docs/explain.md's Warnings table, both ways.
public enum WarningCode: String, CaseIterable, Sendable, Hashable {
    case lostWakeup = "lost_wakeup"
    case modeNeverRuns = "mode_never_runs"
    case performOnIdleLoop = "perform_on_idle_loop"
    case loopCannotWake = "loop_cannot_wake"
    case timerBehind = "timer_behind"
    case stall
    case busyLoop = "busy_loop"
    case storeUnavailable = "store_unavailable"
    case modeMisnamed = "mode_misnamed"
    case emptyModeAsleep = "empty_mode_asleep"
    case nestingLimit = "nesting_limit"
    case livelock
}
