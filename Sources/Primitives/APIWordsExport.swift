// The API's words (`ErrorCode`, `WarningCode`, `ExitCauseCode`) live in the
// dependency-free `APIWords` target, so the build tool that fills
// openapi.json's enums links them too; every layer that imports Primitives
// sees them as before.
@_exported import APIWords
