import RunLoopCore

/// The OpenAPI 3.1 description of the API (served at `/api/openapi.json`).
enum OpenAPIDocument {
    static func document(limits: ServiceConfiguration) -> Value {
        [
            "openapi": "3.1.0",
            "info": ["title": "runloopd", "version": .string(RunLoopService.version)],
            "paths": [:],
        ]
    }
}
