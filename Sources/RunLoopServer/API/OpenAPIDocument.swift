import RunLoopCore

/// The OpenAPI 3.1 description of the API (served at `/api/openapi.json`).
///
/// Written by hand to match `Routes.swift`, `Representations.swift` and
/// `Body.swift`: every route, every field a body accepts (unknown fields are
/// rejected, so objects are closed), the ranges the server enforces (taken from
/// the configuration it runs with), and every status a route can answer.
/// Optional body fields also accept `null`, which the server reads as absent.
enum OpenAPIDocument {
    /// The document for a server configured with `limits`, whose selector
    /// registry holds `selectors` (the built-ins when omitted).
    static func document(limits: ServiceConfiguration, selectors: [Selector]? = nil) -> Value {
        let builder = OpenAPIBuilder(
            configuration: limits, selectors: selectors ?? SelectorRegistry(limits: limits.limits).all)
        return builder.document()
    }
}

// MARK: - Schema helpers

/// Small constructors for JSON Schema (2020-12, as OpenAPI 3.1 uses it).
private enum Schema {
    static func ref(_ name: String) -> Value { ["$ref": .string("#/components/schemas/\(name)")] }

    static func string(minLength: Int? = nil, maxLength: Int? = nil, pattern: String? = nil, description: String? = nil)
        -> Value
    {
        var s: [String: Value] = ["type": "string"]
        if let minLength { s["minLength"] = .number(Double(minLength)) }
        if let maxLength { s["maxLength"] = .number(Double(maxLength)) }
        if let pattern { s["pattern"] = .string(pattern) }
        if let description { s["description"] = .string(description) }
        return .object(s)
    }

    static func number(
        minimum: Double? = nil, exclusiveMinimum: Double? = nil, maximum: Double? = nil, description: String? = nil
    ) -> Value {
        var s: [String: Value] = ["type": "number"]
        if let minimum { s["minimum"] = .number(minimum) }
        if let exclusiveMinimum { s["exclusiveMinimum"] = .number(exclusiveMinimum) }
        if let maximum { s["maximum"] = .number(maximum) }
        if let description { s["description"] = .string(description) }
        return .object(s)
    }

    static func integer(minimum: Double? = nil, maximum: Double? = nil, description: String? = nil) -> Value {
        var s: [String: Value] = ["type": "integer"]
        if let minimum { s["minimum"] = .number(minimum) }
        if let maximum { s["maximum"] = .number(maximum) }
        if let description { s["description"] = .string(description) }
        return .object(s)
    }

    static let boolean: Value = ["type": "boolean"]
    static let count: Value = ["type": "integer", "minimum": 0]
    static let timestamp: Value = [
        "type": "string", "format": "date-time", "description": "ISO-8601, UTC, with milliseconds",
    ]
    static let anyObject: Value = ["type": "object"]

    static func enumeration(_ values: [String], description: String? = nil) -> Value {
        var s: [String: Value] = ["type": "string", "enum": .array(values.map(Value.string))]
        if let description { s["description"] = .string(description) }
        return .object(s)
    }

    static func array(_ items: Value, minItems: Int? = nil, maxItems: Int? = nil) -> Value {
        var s: [String: Value] = ["type": "array", "items": items]
        if let minItems { s["minItems"] = .number(Double(minItems)) }
        if let maxItems { s["maxItems"] = .number(Double(maxItems)) }
        return .object(s)
    }

    /// The same schema, also allowing `null`.
    static func nullable(_ schema: Value) -> Value {
        guard case .object(var s) = schema else { return schema }
        if s["$ref"] != nil || s["oneOf"] != nil || s["anyOf"] != nil || s["allOf"] != nil || s["type"] == nil {
            return ["anyOf": [schema, ["type": "null"]]]
        }
        switch s["type"] {
        case .string(let type)?: s["type"] = [.string(type), "null"]
        case .array(let types)? where !types.contains("null"): s["type"] = .array(types + ["null"])
        default: break
        }
        if case .array(let values)? = s["enum"], !values.contains(.null) { s["enum"] = .array(values + [.null]) }
        return .object(s)
    }

    /// An object whose every listed property is required (a response shape).
    static func record(_ properties: [String: Value], description: String? = nil) -> Value {
        var s: [String: Value] = [
            "type": "object", "properties": .object(properties),
            "required": .array(properties.keys.sorted().map(Value.string)),
        ]
        if let description { s["description"] = .string(description) }
        return .object(s)
    }

    /// A request body object: only `properties` are accepted (400
    /// `unknown_field` otherwise), `required` must be present and not null.
    static func closed(_ properties: [String: Value], required: [String] = [], description: String? = nil) -> Value {
        var s: [String: Value] = [
            "type": "object", "properties": .object(properties), "additionalProperties": false,
        ]
        if !required.isEmpty { s["required"] = .array(required.map(Value.string)) }
        if let description { s["description"] = .string(description) }
        return .object(s)
    }
}

// MARK: - The document

private struct OpenAPIBuilder {
    let configuration: ServiceConfiguration
    let selectors: [Selector]

    private var maxSeconds: Double { configuration.limits.maxSeconds }
    private var maxWait: Double { min(configuration.limits.maxSeconds, configuration.api.maxWaitSeconds) }

    func document() -> Value {
        [
            "openapi": "3.1.0",
            "info": [
                "title": "runloopd",
                "version": .string(RunLoopService.version),
                "summary": "Real CoreFoundation run loops over HTTP.",
                "description": .string(
                    """
                    Every /api request is posted into the control run loop and answered from there. Bodies are \
                    JSON objects (Content-Type: application/json, at most \(configuration.http.maxBodyBytes) bytes, \
                    else 413; another type is 415). Unknown fields are rejected (400 unknown_field); an optional \
                    field set to null counts as absent. Durations are seconds (finite, at most \(maxSeconds)). \
                    A method a path does not support is answered 405 with an Allow header; a path that does not \
                    exist, 404. Errors are {"error": {"code", "message", "field"}}. Every request's Host must be \
                    localhost, 127.0.0.1, [::1], the bound address or an --allowed-host (else 421); a POST or DELETE \
                    whose Origin (or Referer) is neither this server nor an --allowed-origin is refused with 403.
                    """),
            ],
            "tags": .array(
                [
                    ("service", "Version, documents, selectors, events, probes"),
                    ("threads", "Worker threads, each owning a CFRunLoop"), ("perform", "performSelector:onThread:"),
                    ("timers", "CFRunLoopTimer"), ("sources", "source0 (custom) and source1 (port) input sources"),
                    ("modes", "Run-loop modes and the common-modes set"),
                    ("observers", "CFRunLoopObserver and the activity ring"), ("tasks", "The idle task queue"),
                ].map { ["name": .string($0.0), "description": .string($0.1)] }),
            "paths": paths(),
            "components": [
                "schemas": .object(schemas()),
                "parameters": .object(parameters()),
                "responses": .object(errorResponses()),
                "headers": [
                    "Retry-After": [
                        "description": "Seconds to wait before trying again",
                        "schema": ["type": "integer", "minimum": 0],
                    ],
                    "Allow": ["description": "The methods the path accepts", "schema": ["type": "string"]],
                    "Location": ["description": "Where the new resource is", "schema": ["type": "string"]],
                    "WWW-Authenticate": [
                        "description": "The scheme the token is sent with (Bearer)", "schema": ["type": "string"],
                    ],
                ],
            ],
        ]
    }

    // MARK: modes and selector calls

    /// Any mode name: "default", "common", or a custom name (1-64 printable ASCII, no spaces).
    private var modeName: Value {
        Schema.string(
            minLength: 1, maxLength: RunLoopMode.maxNameLength, pattern: "^[!-~]+$",
            description:
                "default (kCFRunLoopDefaultMode), common (the kCFRunLoopCommonModes set) or a custom mode name")
    }

    /// A mode a loop can run in: any mode name except the common set.
    private var runModeName: Value {
        guard case .object(var s) = modeName else { return modeName }
        s["not"] = ["enum": ["common", "kCFRunLoopCommonModes"]]
        s["description"] = "default or a custom mode; common is a set of modes, not a mode to run in"
        return .object(s)
    }

    /// The schema of one selector's `args`.
    private func argumentsSchema(_ selector: Selector) -> Value {
        if selector.acceptsAnyArguments { return Schema.anyObject }
        var properties: [String: Value] = [:]
        var required: [Value] = []
        for arg in selector.arguments {
            var schema: [String: Value] = ["description": .string(arg.summary)]
            switch arg.type {
            case .string:
                schema["type"] = "string"
                if let maxLength = arg.maximum {
                    // The server counts UTF-8 bytes (JSON Schema counts characters, so
                    // this bound is necessary, not sufficient, for non-ASCII text).
                    schema["maxLength"] = .number(maxLength)
                    schema["description"] = .string("\(arg.summary) (at most \(Int(maxLength)) UTF-8 bytes)")
                }
            case .integer, .number, .boolean:
                schema["type"] = .string(arg.type.rawValue)
                if arg.type != .boolean {
                    if let minimum = arg.minimum { schema["minimum"] = .number(minimum) }
                    if let maximum = arg.maximum { schema["maximum"] = .number(maximum) }
                }
            }
            if let value = arg.defaultValue { schema["default"] = value }
            if arg.required {
                required.append(.string(arg.name))
                properties[arg.name] = .object(schema)
            } else {
                properties[arg.name] = Schema.nullable(.object(schema))
            }
        }
        var s: [String: Value] = [
            "type": "object", "properties": .object(properties), "additionalProperties": false,
        ]
        if !required.isEmpty { s["required"] = .array(required) }
        return .object(s)
    }

    /// `selector` names a registered selector and `args` fits its schema.
    private var selectorArguments: Value {
        [
            "oneOf": .array(
                selectors.map { selector in
                    let args = argumentsSchema(selector)
                    let needsArgs = selector.arguments.contains(where: \.required)
                    var properties: [String: Value] = ["selector": ["const": .string(selector.name)]]
                    properties["args"] = needsArgs ? args : Schema.nullable(args)
                    return [
                        "title": .string(selector.name), "description": .string(selector.summary),
                        "properties": .object(properties),
                        "required": needsArgs ? ["selector", "args"] : ["selector"],
                    ]
                })
        ]
    }

    /// The body fields `selector` and `args` (plus `extra`), closed.
    private func callBody(_ extra: [String: Value] = [:], required: [String] = [], description: String) -> Value {
        guard case .object(var s) = Schema.closed(extra, required: ["selector"] + required, description: description)
        else { return .null }
        var properties = s["properties"]?.object ?? [:]
        properties["selector"] = Schema.string(
            minLength: 1, maxLength: 64, description: "a selector name (GET /api/selectors)")
        properties["args"] = Schema.nullable(Schema.anyObject)
        s["properties"] = .object(properties)
        s["allOf"] = [Schema.ref("SelectorArguments")]
        return .object(s)
    }

    // MARK: components

    private func schemas() -> [String: Value] {
        var s: [String: Value] = [:]
        s["ModeName"] = modeName
        s["RunModeName"] = runModeName
        s["ExitReason"] = Schema.enumeration(
            ExitReason.allCases.map(\.name), description: "The CFRunLoopRunResult the loop really returned")
        s["ActivityName"] = Schema.enumeration(Activity.allCases.map(\.rawValue))
        s["ErrorBody"] = Schema.record([
            "code": Schema.string(description: "stable machine-readable code (not_found, bad_value, ...)"),
            "message": Schema.string(), "field": Schema.nullable(Schema.string(description: "the field at fault")),
        ])
        s["Error"] = Schema.record(["error": Schema.ref("ErrorBody")])
        s["ExitReport"] = Schema.record(
            [
                "exitReason": Schema.ref("ExitReason"),
                "code": ["type": "integer", "enum": .array(ExitReason.allCases.map { .number(Double($0.code)) })],
                "mode": Schema.string(), "durationMs": Schema.number(minimum: 0), "at": Schema.timestamp,
                "run": Schema.integer(minimum: 1, description: "the thread's run number"),
                "depth": Schema.integer(minimum: 0, description: "0 for a top-level run, 1+ for nested runs"),
            ], description: "How one run ended")
        s["RunPolicy"] = Schema.record([
            "style": Schema.enumeration(RunStyle.allCases.map(\.rawValue)), "mode": Schema.string(),
            "seconds": Schema.number(minimum: 0), "returnAfterSourceHandled": Schema.boolean,
        ])
        s["SelectorCall"] = Schema.record(["selector": Schema.string(), "args": Schema.anyObject])
        s["SelectorArguments"] = selectorArguments
        s["PendingPerform"] = Schema.record([
            "performId": Schema.string(), "selector": Schema.string(), "args": Schema.anyObject,
            "modes": Schema.array(Schema.string()), "queuedAt": Schema.timestamp,
            "afterDelay": Schema.number(minimum: 0), "fireAt": Schema.nullable(Schema.timestamp),
        ])
        s["Thread"] = thread
        s["ThreadList"] = Schema.record(["threads": Schema.array(Schema.ref("Thread"))])
        s["WakeUpResult"] = Schema.record([
            "thread": Schema.string(), "woken": ["const": true],
            "state": Schema.enumeration(["running", "waiting", "idle", "exited"]),
        ])
        s["ThreadLog"] = Schema.record([
            "lines": Schema.array(Schema.string()),
            "counters": ["type": "object", "additionalProperties": ["type": "integer"]],
        ])
        s["PerformResult"] = Schema.record(
            [
                "performId": Schema.string(), "thread": Schema.string(), "selector": Schema.string(),
                "queuedMs": Schema.number(minimum: 0), "ranMs": Schema.number(minimum: 0), "ok": Schema.boolean,
                "result": ["description": "the selector's value (null when it failed)"],
                "error": Schema.nullable(Schema.ref("ErrorBody")),
            ], description: "A perform that ran (ok) or failed inside its selector (not ok)")
        s["PerformAccepted"] = Schema.record([
            "performId": Schema.string(), "thread": Schema.string(), "selector": Schema.string(),
            "modes": Schema.array(Schema.string()), "afterDelay": Schema.number(minimum: 0),
        ])
        s["PendingList"] = Schema.record(["pending": Schema.array(Schema.ref("PendingPerform"))])
        s["CancelResult"] = Schema.record(["cancelled": Schema.count, "selector": Schema.string()])
        s["Timer"] = timer
        s["TimerList"] = Schema.record(["timers": Schema.array(Schema.ref("Timer"))])
        s["PortMessage"] = Schema.record([
            "msgid": Schema.integer(minimum: 0), "data": Schema.string(), "sentAt": Schema.timestamp,
            "receivedAt": Schema.nullable(Schema.timestamp),
        ])
        s["Source"] = Schema.record(sourceProperties)
        var signalled = sourceProperties
        signalled["wakeup"] = Schema.boolean
        s["SignalResult"] = Schema.record(signalled)
        s["SourceList"] = Schema.record(["sources": Schema.array(Schema.ref("Source"))])
        s["Modes"] = Schema.record([
            "all": Schema.array(Schema.string()), "common": Schema.array(Schema.string()),
            "current": Schema.nullable(Schema.string()),
        ])
        s["Observer"] = Schema.record([
            "id": Schema.string(), "activities": Schema.array(Schema.ref("ActivityName")), "repeats": Schema.boolean,
            "mode": Schema.string(), "order": Schema.integer(), "valid": Schema.boolean, "fired": Schema.count,
        ])
        s["ObserverList"] = Schema.record(["observers": Schema.array(Schema.ref("Observer"))])
        s["Activity"] = Schema.record([
            "seq": Schema.integer(minimum: 1), "at": Schema.timestamp, "activity": Schema.ref("ActivityName"),
            "code": ["type": "integer", "enum": .array(Activity.allCases.map { .number(Double($0.bit)) })],
            "mode": Schema.string(), "observer": Schema.string(),
        ])
        s["ActivityPage"] = Schema.record([
            "activity": Schema.array(Schema.ref("Activity")),
            "lastSeq": Schema.integer(minimum: 0, description: "pass as since= to read only newer records"),
        ])
        s["Task"] = Schema.record([
            "id": Schema.string(), "selector": Schema.string(), "args": Schema.anyObject, "runs": Schema.count,
            "running": Schema.boolean, "addedAt": Schema.timestamp,
        ])
        s["TaskQueue"] = Schema.record(taskQueueProperties)
        var removal = taskQueueProperties
        removal["removed"] = Schema.count
        s["TaskRemoval"] = Schema.record(removal)
        s["ExecuteAccepted"] = Schema.record(["performId": Schema.string(), "thread": Schema.string()])
        s["Version"] = Schema.record([
            "name": ["const": "runloopd"], "version": Schema.string(), "libmicrohttpd": Schema.string(),
            "swift": Schema.string(), "runLoop": Schema.string(),
        ])
        s["SelectorInfo"] = Schema.record([
            "name": Schema.string(), "summary": Schema.string(),
            "args": Schema.record([
                "type": ["const": "object"], "properties": Schema.anyObject, "required": Schema.array(Schema.string()),
                "additionalProperties": Schema.boolean,
            ]),
        ])
        s["SelectorList"] = Schema.record(["selectors": Schema.array(Schema.ref("SelectorInfo"))])
        s["Health"] = Schema.record(["status": ["const": "ok"]])
        s["Ready"] = Schema.record(["status": ["const": "ready"], "threads": Schema.count])
        for (name, schema) in requestSchemas() { s[name] = schema }
        return s
    }

    private var thread: Value {
        var exits: [String: Value] = [:]
        for reason in ExitReason.allCases { exits[reason.name] = Schema.count }
        return Schema.record(
            [
                "id": Schema.string(), "name": Schema.string(), "threadName": Schema.string(maxLength: 15),
                "threadNameTruncated": Schema.boolean,
                "state": Schema.enumeration(["running", "waiting", "idle", "exited"]),
                "currentMode": Schema.nullable(Schema.string()), "depth": Schema.count,
                "keepAlive": Schema.enumeration(KeepAlive.allCases.map(\.rawValue)),
                "run": Schema.ref("RunPolicy"), "runs": Schema.count, "exits": Schema.record(exits),
                "lastExit": Schema.nullable(Schema.ref("ExitReport")), "parked": Schema.boolean,
                "counts": Schema.record([
                    "timers": Schema.count, "sources": Schema.count, "observers": Schema.count,
                    "tasks": Schema.count, "pendingPerforms": Schema.count,
                ]),
                "pendingPerforms": Schema.array(Schema.ref("PendingPerform")), "createdAt": Schema.timestamp,
                "endedAt": Schema.nullable(Schema.timestamp), "ending": Schema.boolean,
            ], description: "A worker thread and its run loop")
    }

    private var timer: Value {
        let ms = Schema.nullable(Schema.number(minimum: 0))
        return Schema.record([
            "id": Schema.string(), "interval": Schema.number(minimum: 0), "repeats": Schema.boolean,
            "delay": Schema.number(minimum: 0), "tolerance": Schema.number(minimum: 0), "mode": Schema.string(),
            "valid": Schema.boolean, "fires": Schema.count, "maxFires": Schema.nullable(Schema.integer(minimum: 1)),
            "nextFireAt": Schema.nullable(Schema.timestamp),
            "lateness": Schema.record(["lastMs": ms, "p50Ms": ms, "p99Ms": ms, "maxMs": ms]),
            "action": Schema.nullable(Schema.ref("SelectorCall")), "lastActionError": Schema.nullable(Schema.string()),
            "createdAt": Schema.timestamp,
        ])
    }

    private var sourceProperties: [String: Value] {
        [
            "id": Schema.string(), "kind": Schema.enumeration(SourceKind.allCases.map(\.rawValue)),
            "mode": Schema.string(), "order": Schema.integer(), "valid": Schema.boolean, "fired": Schema.count,
            "scheduled": Schema.count, "cancelled": Schema.count, "signalled": Schema.boolean,
            "received": Schema.count, "queued": Schema.count,
            "recentMessages": Schema.array(Schema.ref("PortMessage")),
            "action": Schema.nullable(Schema.ref("SelectorCall")),
        ]
    }

    private var taskQueueProperties: [String: Value] {
        [
            "tasks": Schema.array(Schema.ref("Task")), "suspended": Schema.boolean, "done": Schema.count,
            "failed": Schema.count, "capacity": Schema.count, "count": Schema.count,
        ]
    }

    private func requestSchemas() -> [String: Value] {
        let seconds = Schema.number(minimum: 0, maximum: maxSeconds)
        let order = Schema.integer(minimum: -1_000_000, maximum: 1_000_000)
        var s: [String: Value] = [:]
        s["Empty"] = Schema.closed([:], description: "No fields: an empty body or {}")
        s["SelectorCallRequest"] = callBody(description: "A selector and its arguments")
        var runPolicy = Schema.closed([
            "style": Schema.nullable(Schema.enumeration(RunStyle.allCases.map(\.rawValue))),
            "mode": Schema.nullable(Schema.ref("RunModeName")),
            "seconds": Schema.nullable(seconds),
            "returnAfterSourceHandled": Schema.nullable(Schema.boolean),
        ])
        if case .object(var object) = runPolicy {
            // forever runs CFRunLoopRun(), which always uses the default mode.
            object["if"] = ["properties": ["style": ["const": "forever"]], "required": ["style"]]
            object["then"] = ["properties": ["mode": ["enum": ["default", "kCFRunLoopDefaultMode", .null]]]]
            runPolicy = .object(object)
        }
        s["RunPolicyRequest"] = runPolicy
        s["CreateThreadRequest"] = Schema.closed([
            "name": Schema.nullable(
                Schema.string(
                    minLength: 1, maxLength: configuration.limits.maxNameLength,
                    pattern: "^[^\\u0000-\\u001f\\u007f]+$",
                    description: "UTF-8 bytes; the Linux thread name keeps the first 15")),
            "keepAlive": Schema.nullable(Schema.enumeration(KeepAlive.allCases.map(\.rawValue))),
            "run": Schema.nullable(Schema.ref("RunPolicyRequest")),
        ])
        s["RunRequest"] = Schema.closed(
            [
                "mode": Schema.nullable(Schema.ref("RunModeName")),
                "seconds": Schema.number(minimum: 0, maximum: maxWait),
                "returnAfterSourceHandled": Schema.nullable(Schema.boolean),
            ], required: ["seconds"])
        s["PerformRequest"] = callBody(
            [
                "waitUntilDone": Schema.nullable(Schema.boolean),
                "modes": Schema.nullable(Schema.array(Schema.ref("ModeName"), minItems: 1, maxItems: 16)),
                "afterDelay": Schema.nullable(seconds),
                "timeout": Schema.nullable(
                    Schema.number(
                        minimum: 0, maximum: maxWait,
                        description:
                            "waitUntilDone: seconds to wait after afterDelay (default 30, capped at --max-wait); the whole wait never exceeds --max-wait, then 504 and the perform stays pending"
                    )),
            ], description: "performSelector:onThread: (modes default to [common])")
        var timerRequest = Schema.closed(
            [
                "interval": Schema.number(exclusiveMinimum: 0, maximum: maxSeconds),
                "repeats": Schema.nullable(Schema.boolean), "delay": Schema.nullable(seconds),
                "tolerance": Schema.nullable(seconds), "mode": Schema.nullable(Schema.ref("ModeName")),
                "action": Schema.nullable(Schema.ref("SelectorCallRequest")),
                "maxFires": Schema.nullable(Schema.integer(minimum: 1, maximum: 1_000_000_000)),
            ], required: ["interval"])
        if case .object(var object) = timerRequest {
            // Only a one-shot timer may be shorter than the repeating minimum.
            object["if"] = ["properties": ["repeats": ["const": false]], "required": ["repeats"]]
            object["else"] = ["properties": ["interval": ["minimum": .number(configuration.api.minTimerInterval)]]]
            timerRequest = .object(object)
        }
        s["TimerRequest"] = timerRequest
        s["SourceRequest"] = Schema.closed(
            [
                "kind": Schema.enumeration(SourceKind.allCases.map(\.rawValue)),
                "mode": Schema.nullable(Schema.ref("ModeName")), "order": Schema.nullable(order),
                "action": Schema.nullable(Schema.ref("SelectorCallRequest")),
            ], required: ["kind"])
        s["SignalRequest"] = Schema.closed(["wakeup": Schema.nullable(Schema.boolean)])
        s["MessageRequest"] = Schema.closed([
            "msgid": Schema.nullable(Schema.integer(minimum: 0, maximum: 2_147_483_647)),
            "data": Schema.nullable(
                Schema.string(
                    maxLength: configuration.limits.maxMessageBytes, description: "at most that many UTF-8 bytes")),
        ])
        s["CommonModeRequest"] = Schema.closed(["mode": Schema.ref("RunModeName")], required: ["mode"])
        s["ObserverRequest"] = Schema.closed([
            "activities": [
                "anyOf": [
                    Schema.array(Schema.ref("ActivityName"), minItems: 1), ["const": "all"], ["type": "null"],
                ]
            ],
            "repeats": Schema.nullable(Schema.boolean), "mode": Schema.nullable(Schema.ref("ModeName")),
            "order": Schema.nullable(order),
        ])
        s["TaskRequest"] = callBody(
            ["id": Schema.string(minLength: 1, maxLength: 64, description: "unique in the queue; UTF-8 bytes")],
            required: ["id"], description: "An idle task")
        return s
    }

    private func parameters() -> [String: Value] {
        func path(_ name: String, _ description: String) -> Value {
            [
                "name": .string(name), "in": "path", "required": true, "description": .string(description),
                "schema": Schema.string(minLength: 1),
            ]
        }
        return [
            "ThreadId": path("id", "A thread id (t1, ...)"), "TimerId": path("tid", "A timer id (tm1, ...)"),
            "ObserverId": path("oid", "An observer id (ob1, ...)"),
            "SourceId": path("sid", "A source id (s1, ...)"), "TaskId": path("taskId", "A task's id"),
        ]
    }

    // MARK: responses

    private func errorResponses() -> [String: Value] {
        func error(_ description: String, headers: [String] = []) -> Value {
            var response: [String: Value] = [
                "description": .string(description),
                "content": ["application/json": ["schema": Schema.ref("Error")]],
            ]
            if !headers.isEmpty {
                var h: [String: Value] = [:]
                for name in headers { h[name] = ["$ref": .string("#/components/headers/\(name)")] }
                response["headers"] = .object(h)
            }
            return .object(response)
        }
        return [
            "BadRequest": error("Bad JSON, an unknown field or a bad value (field names it)"),
            "NotFound": error("No such thread, timer, source or task"),
            "MethodNotAllowed": error("The path does not accept this method", headers: ["Allow"]),
            "Conflict": error("The request conflicts with the current state (not_running, already_running, ...)"),
            "PayloadTooLarge": error("The body is larger than --max-body"),
            "UnsupportedMediaType": error("The body is not sent as application/json"),
            "TooManyRequests": error("A configured limit refuses more work", headers: ["Retry-After"]),
            "ServiceUnavailable": error("Starting, stopping or overloaded", headers: ["Retry-After"]),
            "GatewayTimeout": error("A wait passed its deadline"),
            "Unauthorized": error(
                "No or a wrong bearer token (runloopd started with --token or --token-file): unauthorized",
                headers: ["WWW-Authenticate"]),
            "Forbidden": error(
                "A state change refused: from a foreign page (Origin or Referer not this server's nor an "
                    + "--allowed-origin: forbidden_origin), or by --read-only (read_only)"),
            "MisdirectedRequest": error(
                "The Host header is not localhost, 127.0.0.1, [::1], the bound address or an --allowed-host "
                    + "(DNS rebinding guard): misdirected_host"),
        ]
    }

    private func json(_ description: String, _ schema: String, location: Bool = false) -> Value {
        var response: [String: Value] = [
            "description": .string(description), "content": ["application/json": ["schema": Schema.ref(schema)]],
        ]
        if location { response["headers"] = ["Location": ["$ref": "#/components/headers/Location"]] }
        return .object(response)
    }

    /// The statuses an operation can answer, beyond its successes.
    private struct Failures: OptionSet {
        let rawValue: Int
        static let badRequest = Failures(rawValue: 1)
        static let notFound = Failures(rawValue: 2)
        static let conflict = Failures(rawValue: 4)
        static let tooMany = Failures(rawValue: 8)
        static let timeout = Failures(rawValue: 16)
        /// Operations with a JSON body: 400, 413, 415.
        static let body = Failures(rawValue: 32)
    }

    private func operation(
        _ id: String, _ tag: String, _ summary: String, parameters: [Value] = [], body: String? = nil,
        bodyRequired: Bool = false, _ successes: [(String, Value)], failures: Failures = []
    ) -> Value {
        var responses: [String: Value] = [:]
        for (status, response) in successes { responses[status] = response }
        func add(_ status: String, _ name: String) {
            responses[status] = ["$ref": .string("#/components/responses/\(name)")]
        }
        if failures.contains(.badRequest) || failures.contains(.body) { add("400", "BadRequest") }
        if failures.contains(.notFound) { add("404", "NotFound") }
        if failures.contains(.conflict) { add("409", "Conflict") }
        if failures.contains(.body) {
            add("413", "PayloadTooLarge")
            add("415", "UnsupportedMediaType")
        }
        if failures.contains(.tooMany) { add("429", "TooManyRequests") }
        add("503", "ServiceUnavailable")
        if failures.contains(.timeout) { add("504", "GatewayTimeout") }
        var op: [String: Value] = [
            "operationId": .string(id), "tags": [.string(tag)], "summary": .string(summary),
            "responses": .object(responses),
        ]
        if !parameters.isEmpty { op["parameters"] = .array(parameters) }
        if let body {
            op["requestBody"] = [
                "required": .bool(bodyRequired),
                "content": ["application/json": ["schema": Schema.ref(body)]],
            ]
        }
        return .object(op)
    }

    private func param(_ name: String) -> Value { ["$ref": .string("#/components/parameters/\(name)")] }

    private func paths() -> Value {
        let thread = param("ThreadId")
        let ok = "200"
        var p: [String: Value] = [:]

        p["/api/version"] = ["get": operation("getVersion", "service", "Version", [(ok, json("Version", "Version"))])]
        p["/api/openapi.json"] = [
            "get": operation(
                "getOpenAPI", "service", "This document",
                [(ok, ["description": "OpenAPI 3.1", "content": ["application/json": ["schema": Schema.anyObject]]])])
        ]
        p["/api/selectors"] = [
            "get": operation(
                "listSelectors", "service", "The named actions a perform, timer, source or task may call",
                [(ok, json("Selectors with their argument schemas", "SelectorList"))])
        ]
        p["/api/events"] = [
            "get": operation(
                "streamEvents", "service",
                "Server-Sent Events: hello, thread, run-exit, timer, perform, source, task, activity",
                parameters: [
                    [
                        "name": "thread", "in": "query", "required": false,
                        "description": "only this thread's events", "schema": ["type": "string"],
                    ]
                ],
                [
                    (
                        ok,
                        [
                            "description": "An endless text/event-stream",
                            "content": ["text/event-stream": ["schema": ["type": "string"]]],
                        ]
                    )
                ], failures: .tooMany)
        ]
        p["/healthz"] = [
            "get": [
                "operationId": "healthz", "tags": ["service"], "summary": "Liveness",
                "responses": [ok: json("Alive", "Health")],
            ]
        ]
        p["/readyz"] = [
            "get": [
                "operationId": "readyz", "tags": ["service"], "summary": "Readiness",
                "responses": [
                    ok: json("Accepting requests", "Ready"),
                    "503": ["$ref": "#/components/responses/ServiceUnavailable"],
                ],
            ]
        ]

        p["/api/threads"] = [
            "post": operation(
                "createThread", "threads", "Create a worker thread", body: "CreateThreadRequest",
                [("201", json("The new thread", "Thread", location: true))], failures: [.body, .tooMany]),
            "get": operation("listThreads", "threads", "Every thread", [(ok, json("Threads", "ThreadList"))]),
        ]
        p["/api/threads/{id}"] = [
            "parameters": [thread],
            "get": operation(
                "getThread", "threads", "One thread", [(ok, json("The thread", "Thread"))], failures: .notFound),
            "delete": operation(
                "endThread", "threads", "End the thread (cancel, stop, keep-alive removed, joined)",
                [(ok, json("The final thread", "Thread"))], failures: [.notFound, .timeout]),
        ]
        p["/api/threads/{id}/run"] = [
            "parameters": [thread],
            "post": operation(
                "runThread", "threads", "Run a manual thread's loop once (CFRunLoopRunInMode); waits for it",
                body: "RunRequest", bodyRequired: true, [(ok, json("How the run ended", "ExitReport"))],
                failures: [.body, .notFound, .conflict, .timeout]),
        ]
        p["/api/threads/{id}/stop"] = [
            "parameters": [thread],
            "post": operation(
                "stopThread", "threads", "CFRunLoopStop; answers with the exit of the run it ended", body: "Empty",
                [(ok, json("The exit of the stopped run", "ExitReport"))],
                failures: [.body, .notFound, .conflict, .timeout]),
        ]
        p["/api/threads/{id}/wakeup"] = [
            "parameters": [thread],
            "post": operation(
                "wakeUpThread", "threads", "CFRunLoopWakeUp", body: "Empty", [(ok, json("Woken", "WakeUpResult"))],
                failures: [.body, .notFound, .conflict]),
        ]
        p["/api/threads/{id}/log"] = [
            "parameters": [thread],
            "get": operation(
                "getThreadLog", "threads", "Lines written by the log selector and counters of count",
                [(ok, json("Log and counters", "ThreadLog"))], failures: .notFound),
        ]

        p["/api/threads/{id}/perform"] = [
            "parameters": [thread],
            "post": operation(
                "perform", "perform", "performSelector:onThread:withObject:waitUntilDone:modes:",
                body: "PerformRequest", bodyRequired: true,
                [
                    (ok, json("waitUntilDone: the perform ran", "PerformResult")),
                    ("202", json("Queued", "PerformAccepted", location: true)),
                ], failures: [.body, .notFound, .conflict, .tooMany, .timeout]),
            "get": operation(
                "listPendingPerforms", "perform", "Performs queued and not yet run",
                [(ok, json("Pending performs", "PendingList"))], failures: .notFound),
            "delete": operation(
                "cancelDelayedPerforms", "perform", "Cancel delayed performs of a selector not yet fired",
                parameters: [
                    [
                        "name": "selector", "in": "query", "required": true, "description": "the selector's name",
                        "schema": Schema.string(minLength: 1),
                    ]
                ], [(ok, json("How many were cancelled", "CancelResult"))], failures: [.badRequest, .notFound]),
        ]

        p["/api/threads/{id}/timers"] = [
            "parameters": [thread],
            "post": operation(
                "addTimer", "timers", "Add a CFRunLoopTimer", body: "TimerRequest", bodyRequired: true,
                [("201", json("The timer", "Timer", location: true))],
                failures: [.body, .notFound, .conflict, .tooMany]),
            "get": operation(
                "listTimers", "timers", "The thread's timers", [(ok, json("Timers", "TimerList"))], failures: .notFound),
        ]
        p["/api/threads/{id}/timers/{tid}"] = [
            "parameters": [thread, param("TimerId")],
            "get": operation(
                "getTimer", "timers", "One timer", [(ok, json("The timer", "Timer"))], failures: .notFound),
            "delete": operation(
                "invalidateTimer", "timers", "CFRunLoopTimerInvalidate", [(ok, json("The timer", "Timer"))],
                failures: .notFound),
        ]

        p["/api/threads/{id}/sources"] = [
            "parameters": [thread],
            "post": operation(
                "addSource", "sources", "Add a custom (source0) or port (source1) input source", body: "SourceRequest",
                bodyRequired: true, [("201", json("The source", "Source", location: true))],
                failures: [.body, .notFound, .conflict, .tooMany]),
            "get": operation(
                "listSources", "sources", "The thread's sources", [(ok, json("Sources", "SourceList"))],
                failures: .notFound),
        ]
        p["/api/threads/{id}/sources/{sid}"] = [
            "parameters": [thread, param("SourceId")],
            "get": operation(
                "getSource", "sources", "One source", [(ok, json("The source", "Source"))], failures: .notFound),
            "delete": operation(
                "invalidateSource", "sources", "CFRunLoopSourceInvalidate (the cancel routine runs)",
                [(ok, json("The source", "Source"))], failures: .notFound),
        ]
        p["/api/threads/{id}/sources/{sid}/signal"] = [
            "parameters": [thread, param("SourceId")],
            "post": operation(
                "signalSource", "sources", "CFRunLoopSourceSignal on a custom source (and CFRunLoopWakeUp)",
                body: "SignalRequest", [(ok, json("The source", "SignalResult"))],
                failures: [.body, .notFound, .conflict]),
        ]
        p["/api/threads/{id}/sources/{sid}/messages"] = [
            "parameters": [thread, param("SourceId")],
            "post": operation(
                "sendPortMessage", "sources", "Queue a message on a port source and ring its eventfd",
                body: "MessageRequest", [("202", json("The source", "Source"))],
                failures: [.body, .notFound, .conflict, .tooMany]),
        ]

        p["/api/threads/{id}/modes"] = [
            "parameters": [thread],
            "get": operation(
                "getModes", "modes", "All modes, the common set, the current mode", [(ok, json("Modes", "Modes"))],
                failures: .notFound),
        ]
        p["/api/threads/{id}/modes/common"] = [
            "parameters": [thread],
            "post": operation(
                "addCommonMode", "modes", "CFRunLoopAddCommonMode", body: "CommonModeRequest", bodyRequired: true,
                [(ok, json("Modes", "Modes"))], failures: [.body, .notFound, .conflict]),
        ]
        p["/api/threads/{id}/observers"] = [
            "parameters": [thread],
            "post": operation(
                "addObserver", "observers", "Add a CFRunLoopObserver writing into the activity ring",
                body: "ObserverRequest", [("201", json("The observer", "Observer"))],
                failures: [.body, .notFound, .conflict, .tooMany]),
            "get": operation(
                "listObservers", "observers", "The thread's observers", [(ok, json("Observers", "ObserverList"))],
                failures: .notFound),
        ]
        p["/api/threads/{id}/observers/{oid}"] = [
            "parameters": [thread, param("ObserverId")],
            "delete": operation(
                "invalidateObserver", "observers", "CFRunLoopObserverInvalidate (no more activities recorded)",
                [(ok, json("The observer", "Observer"))], failures: .notFound),
        ]
        p["/api/threads/{id}/activity"] = [
            "parameters": [thread],
            "get": operation(
                "getActivity", "observers", "Recorded activities (bounded ring)",
                parameters: [
                    [
                        "name": "since", "in": "query", "required": false,
                        "description": "only records with a larger seq",
                        "schema": ["type": "integer", "minimum": 0],
                    ]
                ], [(ok, json("Activities", "ActivityPage"))], failures: [.badRequest, .notFound]),
        ]

        p["/api/threads/{id}/tasks"] = [
            "parameters": [thread],
            "post": operation(
                "addTask", "tasks", "Queue an idle task (one runs per loop turn, before waiting)",
                body: "TaskRequest", bodyRequired: true, [("201", json("The queue", "TaskQueue"))],
                failures: [.body, .notFound, .conflict]),
            "get": operation(
                "getTasks", "tasks", "The queue", [(ok, json("The queue", "TaskQueue"))], failures: .notFound),
            "delete": operation(
                "removeAllTasks", "tasks", "Remove every task (409 while one runs)",
                [(ok, json("The queue and how many were removed", "TaskRemoval"))], failures: [.notFound, .conflict]),
        ]
        p["/api/threads/{id}/tasks/{taskId}"] = [
            "parameters": [thread, param("TaskId")],
            "delete": operation(
                "removeTask", "tasks", "Remove one task (409 while it runs)", [(ok, json("The queue", "TaskQueue"))],
                failures: [.notFound, .conflict]),
        ]
        for (action, summary) in [("suspend", "Suspend the queue"), ("resume", "Resume the queue")] {
            p["/api/threads/{id}/tasks/\(action)"] = [
                "parameters": [thread],
                "post": operation(
                    "\(action)Tasks", "tasks", summary, body: "Empty", [(ok, json("The queue", "TaskQueue"))],
                    failures: [.body, .notFound, .conflict]),
            ]
        }
        p["/api/threads/{id}/tasks/execute"] = [
            "parameters": [thread],
            "post": operation(
                "executeTask", "tasks", "Run a selector now through a source0 + wake-up",
                body: "SelectorCallRequest", bodyRequired: true, [("202", json("Queued", "ExecuteAccepted"))],
                failures: [.body, .notFound, .conflict, .tooMany]),
        ]
        // `DELETE …/tasks/{taskId}` matches these paths too: it removes the task
        // whose id is that word, so the method is listed (and sent in `Allow`).
        for action in ["suspend", "resume", "execute"] {
            guard case .object(var item)? = p["/api/threads/{id}/tasks/\(action)"] else { continue }
            item["delete"] = operation(
                "removeTaskNamed\(action.prefix(1).uppercased())\(action.dropFirst())", "tasks",
                "Remove the task whose id is \"\(action)\" (the {taskId} route)",
                [(ok, json("The queue", "TaskQueue"))], failures: [.notFound, .conflict])
            p["/api/threads/{id}/tasks/\(action)"] = .object(item)
        }
        return .object(Self.withGuardResponses(p))
    }

    /// The answers of the checks made before routing: 421 on every operation
    /// (a Host outside the allow-list), 401 on every /api one (with --token),
    /// 403 on every state-changing one (a foreign Origin, or --read-only).
    private static func withGuardResponses(_ paths: [String: Value]) -> [String: Value] {
        var result = paths
        for (path, item) in paths {
            guard case .object(var methods) = item else { continue }
            for (method, value) in methods {
                guard case .object(var operation) = value, case .object(var responses)? = operation["responses"]
                else { continue }
                responses["421"] = "#/components/responses/MisdirectedRequest".asRef
                if path.hasPrefix("/api/") { responses["401"] = "#/components/responses/Unauthorized".asRef }
                if method == "post" || method == "delete" {
                    responses["403"] = "#/components/responses/Forbidden".asRef
                }
                operation["responses"] = .object(responses)
                methods[method] = .object(operation)
            }
            result[path] = .object(methods)
        }
        return result
    }
}

extension String {
    /// `{"$ref": self}`.
    fileprivate var asRef: Value { ["$ref": .string(self)] }
}
