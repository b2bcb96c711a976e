/// Every `ExitCause.code` runloopd gives: the one list. The build writes it
/// into openapi.json's `ExitCause.code` enum (`OpenAPIEnums`);
/// docs/explain.md's "Why a run ended" table is held against it, both ways
/// (`APIWordsTests`), as `ExitCause.swift`'s codes are.
public enum ExitCauseCode: String, CaseIterable, Sendable {
    case sourceHandled = "source_handled"
    case deadline
    case stopRequest = "stop_request"
    case stopSelector = "stop_selector"
    case threadEnding = "thread_ending"
    case serviceStopping = "service_stopping"
    case modeEmpty = "mode_empty"
    case modeMissing = "mode_missing"
}
