import RunLoopCore

/// The OpenAPI 3.1 description of the API (served at `/api/openapi.json`).
///
/// The contract is `openapi.json` next to this file: written by hand, with a
/// description for every field, default and status (it is the API reference;
/// `docs/api.md` is the guide). The `EmbedFiles` build plugin compiles it
/// into the binary as `OpenAPISpec.json` at every build, so no resource file is
/// needed at run time and only the JSON is in git.
///
/// Only what depends on the running server changes, once, at start-up:
/// - `info.version`: this build's version;
/// - `info.x-runloopd-limits`: the bounds this server was configured with,
///   and every schema keyword named in an `x-runloopd-limit` annotation
///   (`{"maximum": "max-seconds"}`) takes the bound it names;
/// - `components.schemas.SelectorArguments`: one alternative per registered
///   selector, custom ones included, built from their argument schemas.
/// The committed file holds the values of a server with the default
/// configuration and the built-in selectors (a test keeps it so).
enum OpenAPIDocument {
    /// The document for a server configured with `limits`, whose selector
    /// registry holds `selectors` (the built-ins when omitted).
    static func document(limits: ServiceConfiguration, selectors: [Selector]? = nil) -> Value {
        let selectors = selectors ?? SelectorRegistry(limits: limits.limits).all
        let bounds = limitValues(limits)
        guard case .object(var root) = overlay(embedded, bounds: bounds) else { return embedded }
        if case .object(var info)? = root["info"] {
            info["version"] = .string(RunLoopService.version)
            info["x-runloopd-limits"] = .object(bounds)
            root["info"] = .object(info)
        }
        if case .object(var components)? = root["components"], case .object(var schemas)? = components["schemas"],
            case .object(var arguments)? = schemas["SelectorArguments"]
        {
            arguments["oneOf"] = .array(selectors.map(alternative))
            schemas["SelectorArguments"] = .object(arguments)
            components["schemas"] = .object(schemas)
            root["components"] = .object(components)
        }
        return .object(root)
    }

    /// The committed document, parsed (it is checked by a test, so it parses).
    static var embedded: Value {
        do {
            return try JSON.parse(Array(OpenAPISpec.json.utf8))
        } catch {
            preconditionFailure("the embedded openapi.json is not JSON: \(error.message)")
        }
    }

    /// The bounds named by `x-runloopd-limit` annotations, by flag name.
    static func limitValues(_ configuration: ServiceConfiguration) -> [String: Value] {
        let limits = configuration.limits
        let api = configuration.api
        func number(_ value: Int) -> Value { .number(Double(value)) }
        return [
            "max-body": number(configuration.http.maxBodyBytes),
            "max-seconds": .number(limits.maxSeconds),
            // A wait is a duration too: never longer than --max-seconds.
            "max-wait": .number(min(limits.maxSeconds, api.maxWaitSeconds)),
            "min-timer-interval": .number(api.minTimerInterval),
            "max-name-length": number(limits.maxNameLength),
            "max-message-bytes": number(limits.maxMessageBytes),
            "max-threads": number(limits.maxWorkers),
            "max-timers": number(limits.maxTimersPerWorker),
            "max-queued": number(limits.maxQueuedCommands),
            "max-tasks": number(limits.taskCapacity),
            "max-event-clients": number(api.maxEventClients),
            "max-thread-page": number(api.maxThreadPage),
            "stream-max-inspect": number(api.streamMaxInspect),
            "max-turn-ring-size": number(configuration.diagnostics.maxTurnRingSize),
        ]
    }

    /// `value` with every `x-runloopd-limit` keyword set to the bound it names.
    private static func overlay(_ value: Value, bounds: [String: Value]) -> Value {
        switch value {
        case .object(var members):
            for (key, member) in members { members[key] = overlay(member, bounds: bounds) }
            if case .object(let annotation)? = members["x-runloopd-limit"] {
                for (keyword, name) in annotation {
                    if let name = name.string, let bound = bounds[name] { members[keyword] = bound }
                }
            }
            return .object(members)
        case .array(let items):
            return .array(items.map { overlay($0, bounds: bounds) })
        default:
            return value
        }
    }

    // MARK: - Selector arguments

    /// `selector` names this selector and `args` fits its schema.
    private static func alternative(_ selector: Selector) -> Value {
        let args = argumentsSchema(selector)
        let needsArgs = selector.arguments.contains(where: \.required)
        return [
            "title": .string(selector.name), "description": .string(selector.summary),
            "properties": [
                "selector": ["const": .string(selector.name), "description": "the selector's name"],
                "args": described(needsArgs ? args : nullable(args), "the selector's arguments"),
            ],
            "required": needsArgs ? ["selector", "args"] : ["selector"],
        ]
    }

    /// The schema of one selector's `args` (optional arguments also accept null).
    private static func argumentsSchema(_ selector: Selector) -> Value {
        if selector.acceptsAnyArguments { return ["type": "object"] }
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
            case .object:
                schema["type"] = "object"
            case .stringList:
                schema["type"] = "array"
                schema["items"] = ["type": "string"]
                if let maximum = arg.maximum { schema["maxItems"] = .number(maximum) }
            }
            if let value = arg.defaultValue { schema["default"] = value }
            if arg.required {
                required.append(.string(arg.name))
                properties[arg.name] = .object(schema)
            } else {
                properties[arg.name] = nullable(.object(schema))
            }
        }
        var s: [String: Value] = [
            "type": "object", "properties": .object(properties), "additionalProperties": false,
        ]
        if !required.isEmpty { s["required"] = .array(required) }
        return .object(s)
    }

    /// The same schema with a description.
    private static func described(_ schema: Value, _ text: String) -> Value {
        guard case .object(var s) = schema else { return schema }
        s["description"] = .string(text)
        return .object(s)
    }

    /// The same schema, its `type` also allowing null.
    private static func nullable(_ schema: Value) -> Value {
        guard case .object(var s) = schema, case .string(let type)? = s["type"] else { return schema }
        s["type"] = [.string(type), "null"]
        return .object(s)
    }
}
