import MicroHTTP
import ArgumentParser
import Foundation
import Logging
import RunLoopCore
import RunLoopServer
import RunLoopStore

/// `runloopd`: serve real CoreFoundation run loops over HTTP (`serve`, the
/// default), or probe a running server (`healthcheck`).
struct RunLoopdCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "runloopd",
        abstract: "An HTTP service that exposes real CoreFoundation run loops.",
        version: RunLoopService.version,
        subcommands: [Serve.self, Play.self, Healthcheck.self],
        defaultSubcommand: Serve.self
    )

    /// `main()`, except that a bad flag or value under `--log-format json`
    /// (or `RUNLOOPD_LOG_FORMAT=json`) is reported as one JSON log line at
    /// `error`, as everything else the process writes (exit status 64 as
    /// ArgumentParser's own). Help, `--version` and the exit codes `run`
    /// throws go the usual way.
    static func mainInChosenLogFormat(_ arguments: [String] = Array(CommandLine.arguments.dropFirst())) {
        let command: ParsableCommand
        do {
            command = try parseAsRoot(arguments)
        } catch {
            guard exitCode(for: error) != .success, Self.jsonLogs(arguments) else { exit(withError: error) }
            LogSink.standardError.append(
                JSONLogLine.line(
                    at: Date(), level: .error, label: "runloopd", message: "cannot start: \(message(for: error))",
                    source: "runloopd",
                    values: [
                        ("exitCode", .literal("\(exitCode(for: error).rawValue)")),
                        ("help", .string("runloopd serve --help lists every option")),
                    ]))
            LogSink.standardError.flush()
            Foundation.exit(exitCode(for: error).rawValue)
        }
        do {
            var command = command
            try command.run()
        } catch {
            exit(withError: error)
        }
    }

    /// Whether the arguments (or the environment) ask for JSON logs.
    static func jsonLogs(_ arguments: [String]) -> Bool {
        for (index, argument) in arguments.enumerated() {
            if argument == "--log-format=json" { return true }
            if argument == "--log-format", index + 1 < arguments.count { return arguments[index + 1] == "json" }
        }
        return Env.string("LOG_FORMAT") == "json"
    }
}

/// `runloopd serve`: the service.
struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve the API and the dashboard (the default command).",
        discussion: """
            Every option can also be set with an environment variable: RUNLOOPD_ and the option's name in \
            upper case with underscores (RUNLOOPD_PORT, RUNLOOPD_MAX_THREADS, ...). A flag on the command line wins.
            """,
        version: RunLoopService.version
    )

    @Option(help: "Address to bind (127.0.0.1, ::1, 0.0.0.0).")
    var host: String = Env.string("HOST") ?? HTTPServerConfiguration.defaultHost

    @Option(help: "TCP port (0 picks a free one).")
    var port: UInt16 = Env.integer("PORT").map(UInt16.init(clamping:)) ?? HTTPServerConfiguration.defaultPort

    @Option(help: "libmicrohttpd threads: 1 = one epoll thread, N > 1 = a pool.")
    var httpThreads: Int = Env.integer("HTTP_THREADS") ?? HTTPServerConfiguration.defaultHTTPThreads

    @Option(help: "Worker threads alive at once.")
    var maxThreads: Int = Env.integer("MAX_THREADS") ?? Limits().maxWorkers

    @Option(help: "Timers per worker thread.")
    var maxTimers: Int = Env.integer("MAX_TIMERS") ?? Limits().maxTimersPerWorker

    @Option(help: "Performs queued on one thread and not yet run.")
    var maxQueued: Int = Env.integer("MAX_QUEUED") ?? Limits().maxQueuedCommands

    @Option(help: "Idle tasks per thread (the task queue's capacity).")
    var maxTasks: Int = Env.integer("MAX_TASKS") ?? Limits().taskCapacity

    @Option(help: "Answered performs each thread remembers for GET /api/threads/{id}/performs/{pid}.")
    var performHistory: Int = Env.integer("PERFORM_HISTORY") ?? Limits().performHistory

    @Option(help: "Largest request body in bytes (413 beyond).")
    var maxBody: Int = Env.integer("MAX_BODY") ?? HTTPServerConfiguration.defaultMaxBodyBytes

    @Option(help: "Largest seconds / interval / delay accepted.")
    var maxSeconds: Double = Env.double("MAX_SECONDS") ?? Limits().maxSeconds

    @Option(
        help:
            "Longest wait one request may ask for (perform timeout, manual run), seconds; also caps how long a stop (10 s) or an end (15 s) waits for a blocked loop."
    )
    var maxWait: Double = Env.double("MAX_WAIT") ?? APILimits().maxWaitSeconds

    @Option(help: "Concurrent connections.")
    var maxConnections: Int = Env.integer("MAX_CONNECTIONS") ?? HTTPServerConfiguration.defaultConnectionLimit

    @Option(help: "Concurrent connections from one IP address.")
    var maxConnectionsPerIp: Int =
        Env.integer("MAX_CONNECTIONS_PER_IP") ?? HTTPServerConfiguration.defaultPerIPConnectionLimit

    @Option(help: "Idle connection timeout, seconds.")
    var connectionTimeout: Double = Env.double("CONNECTION_TIMEOUT") ?? HTTPServerConfiguration.defaultConnectionTimeout

    @Option(
        help:
            "Seconds a client has to send a whole request (headers and body), from its connection or request line; then it is closed."
    )
    var requestDeadline: Double = Env.double("REQUEST_DEADLINE") ?? HTTPServerConfiguration.defaultRequestDeadline

    @Option(help: "Connections still sending their request; past it the oldest (pending over 1 s) is closed.")
    var maxPendingRequests: Int =
        Env.integer("MAX_PENDING_REQUESTS") ?? HTTPServerConfiguration.defaultMaxPendingRequests

    @Option(help: "Query parameters a request may carry (more: 414).")
    var maxQueryParams: Int = Env.integer("MAX_QUERY_PARAMS") ?? HTTPServerConfiguration.defaultMaxQueryParameters

    @Option(help: "Header fields a request may carry (more: 431).")
    var maxHeaders: Int = Env.integer("MAX_HEADERS") ?? HTTPServerConfiguration.defaultMaxHeaders

    @Option(help: "Event-stream (SSE) clients at once.")
    var maxEventClients: Int = Env.integer("MAX_EVENT_CLIENTS") ?? APILimits().maxEventClients

    @Option(help: "Requests queued for the control loop before 503.")
    var maxQueuedRequests: Int = Env.integer("MAX_QUEUED_REQUESTS") ?? ServiceConfiguration().maxQueuedRequests

    @Option(help: "The dashboard folder served at /.")
    var publicDir: String = Env.string("PUBLIC_DIR") ?? "Public"

    @Option(help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: String = Env.string("LOG_LEVEL") ?? "info"

    @Option(
        help: ArgumentHelp(
            "Read the log level from this file (one level name) at start and on every SIGHUP; it wins over --log-level.",
            discussion:
                "For a level changed without a restart: edit the file (or the ConfigMap it is mounted from), then send SIGHUP. A file that cannot be read or names no level refuses the start, and on SIGHUP keeps the level with a warning."
        ))
    var logLevelFile: String = Env.string("LOG_LEVEL_FILE") ?? ""

    @Option(help: "text (human-readable) or json (one JSON object per line).")
    var logFormat: String = Env.string("LOG_FORMAT") ?? "text"

    @Option(
        help: "Require Authorization: Bearer <token> on every /api request (prefer RUNLOOPD_TOKEN or --token-file).")
    var token: String = Env.string("TOKEN") ?? ""

    @Option(
        help:
            "Read the token from this file (a mounted Docker or Kubernetes secret); surrounding whitespace is ignored.")
    var tokenFile: String = Env.string("TOKEN_FILE") ?? ""

    @Flag(help: "Allow serving the API without a token on a non-loopback address (anyone who can connect controls it).")
    var noAuth: Bool = Env.bool("NO_AUTH") ?? false

    @Option(
        help: ArgumentHelp(
            "Another name the Host header may carry (repeatable; '*' turns the DNS-rebinding check off).",
            discussion:
                "localhost, 127.0.0.1, [::1] and the bound address are always allowed. RUNLOOPD_ALLOWED_HOST takes a comma-separated list."
        ))
    var allowedHost: [String] = Env.list("ALLOWED_HOST")

    @Option(
        help: ArgumentHelp(
            "Another origin whose pages may change state, e.g. https://dash.example:8443 (repeatable).",
            discussion: "RUNLOOPD_ALLOWED_ORIGIN takes a comma-separated list."))
    var allowedOrigin: [String] = Env.list("ALLOWED_ORIGIN")

    @Flag(help: "Refuse every mutating API call with 403.")
    var readOnly: Bool = Env.bool("READ_ONLY") ?? false

    @Flag(
        inversion: .prefixedNo,
        help: "Record every loop's turns, callouts, utilisation and stalls (the explainer; on by default).")
    var trace: Bool = Env.bool("TRACE") ?? true

    @Option(help: "Turns kept per thread (GET /api/threads/{id}/turns).")
    var turnRingSize: Int = Env.integer("TURN_RING_SIZE") ?? 256

    @Option(help: "The most turns one thread may ask to keep (turnRingSize in POST /api/threads).")
    var maxTurnRingSize: Int = Env.integer("MAX_TURN_RING_SIZE") ?? 16_384

    @Option(help: "Callouts kept per turn (more are counted, not kept).")
    var maxCalloutsPerTurn: Int = Env.integer("MAX_CALLOUTS_PER_TURN") ?? 16

    @Option(help: "Stall thresholds in milliseconds: micro-hang,hang,severe.")
    var stallThresholds: String = Env.string("STALL_THRESHOLDS") ?? "100,250,500"

    @Option(help: "Seconds a source signalled without a wake-up may wait on a sleeping loop before lost_wakeup.")
    var lostWakeupAfter: Double = Env.double("LOST_WAKEUP_AFTER") ?? 0.5

    @Option(help: "Seconds a perform may wait on a loop that is not running before perform_on_idle_loop.")
    var idlePerformAfter: Double = Env.double("IDLE_PERFORM_AFTER") ?? 0.5

    @Option(help: "Seconds work may wait in a mode the thread does not run before mode_never_runs.")
    var modeNeverRunsAfter: Double = Env.double("MODE_NEVER_RUNS_AFTER") ?? 5

    @Option(help: "Utilisation window in seconds (busy_loop needs it full).")
    var busyWindow: Double = Env.double("BUSY_WINDOW") ?? 10

    @Option(help: "Utilisation above this share of the window is a busy loop (0-1).")
    var busyThreshold: Double = Env.double("BUSY_THRESHOLD") ?? 0.9

    @Option(help: "Warnings kept (the oldest inactive ones are forgotten first).")
    var maxWarnings: Int = Env.integer("MAX_WARNINGS") ?? 1024

    @Option(help: "State-changing requests the journal keeps for GET /api/journal (0: no journal).")
    var journalSize: Int = Env.integer("JOURNAL_SIZE") ?? ServiceConfiguration().journalSize

    @Option(help: "Folder of experiment files served by GET /api/experiments.")
    var experimentsDir: String = Env.string("EXPERIMENTS_DIR") ?? ServiceConfiguration().experimentsDirectory

    @Flag(help: "Keep nothing on disk: no history store (history, fleet and Last-Event-ID resume are off).")
    var noStore: Bool = Env.bool("NO_STORE") ?? false

    @Option(
        help: ArgumentHelp(
            "Where history is kept: sqlite (history.sqlite in --data-dir), sqlite:PATH, or postgres://user:password@host:port/database for a fleet.",
            valueName: "url"))
    var store: String = Env.string("STORE") ?? "sqlite"

    @Option(help: "Folder of the SQLite history store (default: $XDG_STATE_HOME/runloopd or ~/.local/state/runloopd).")
    var dataDir: String = Env.string("DATA_DIR") ?? StoreOptions.defaultDataDirectory()

    @Option(help: "Keep history this long (e.g. 7d, 12h, 30m; 0: no age limit).")
    var retention: String = Env.string("RETENTION") ?? "7d"

    @Option(help: "Keep at most this much history (e.g. 256MB, 1GB; 0: no size limit); the oldest goes first.")
    var retentionSize: String = Env.string("RETENTION_SIZE") ?? "256MB"

    @Option(
        help: ArgumentHelp(
            "Whose history the retention prunes: instance (this instance's only) or fleet (every instance's; for one designated instance of a fleet).",
            valueName: "instance|fleet"))
    var retentionScope: String = Env.string("RETENTION_SCOPE") ?? RetentionScope.instance.rawValue

    @Option(
        help: ArgumentHelp(
            "A file holding the PostgreSQL password (its first line; read at each connection), instead of a password in --store.",
            valueName: "path"))
    var storePasswordFile: String = Env.string("STORE_PASSWORD_FILE") ?? ""

    @Option(
        help: "Events waiting for the store's writer; a full queue drops the oldest (runloopd_store_dropped_total).")
    var storeQueue: Int = Env.integer("STORE_QUEUE") ?? StoreOptions().queueCapacity

    @Option(help: "Seconds between the store writer's commits, at least (batches).")
    var storeFlushInterval: Double = Env.double("STORE_FLUSH_INTERVAL") ?? StoreOptions().flushInterval

    @Option(help: "Seconds between heartbeats to the store (an instance is lost after 3 missed).")
    var heartbeatInterval: Double = Env.double("HEARTBEAT_INTERVAL") ?? StoreOptions().heartbeatInterval

    @Option(help: "Seconds a PostgreSQL store may take to connect or answer one statement before the batch is retried.")
    var storeTimeout: Double = Env.double("STORE_TIMEOUT") ?? StoreOptions().queryTimeout

    @Option(help: "Most kept events one history page or one resumed event stream (Last-Event-ID) returns.")
    var replayLimit: Int = Env.integer("REPLAY_LIMIT") ?? StoreOptions().replayLimit

    @Option(help: "This instance's id in the store (default: host name and port).")
    var instanceId: String = Env.string("INSTANCE_ID") ?? ""

    @Option(help: "The URL other instances link to for this one's dashboard (default: from host and port).")
    var advertiseUrl: String = Env.string("ADVERTISE_URL") ?? ""

    @Option(
        help: ArgumentHelp(
            "Seconds SIGTERM keeps serving with /readyz at 503 before the stop begins (0: stop at once).",
            discussion:
                "Lets a load balancer take the instance out before it stops listening. A second SIGTERM (or SIGINT) ends the drain early; SIGINT alone stops at once. The stop itself is then bounded by 4 s."
        ))
    var drainDelay: Double = Env.double("DRAIN_DELAY") ?? Serve.defaultDrainDelay

    /// The drain a SIGTERM starts with, in seconds.
    static let defaultDrainDelay: Double = 5

    @Option(help: "Write the bound port to this file once listening (for scripts and tests with --port 0).")
    var portFile: String = Env.string("PORT_FILE") ?? ""

    @Option(
        help: ArgumentHelp(
            "A setup file (JSON) whose threads, sources, timers, observers, tasks and performs are created at start.",
            discussion:
                "Applied through the API's own routes once listening; until it is done /readyz is not ready and /api answers 503. A file that cannot be read or a step the API refuses exits with status 78 (EX_CONFIG) before the API is served. Format: docs/setup.md; GET /api/setup exports the live state in it."
        ))
    var setup: String = Env.string("SETUP") ?? ""

    /// The exit status when `--setup` cannot be read or applied (sysexits' EX_CONFIG).
    static let setupExitCode: Int32 = 78

    func validate() throws {
        guard ["text", "json"].contains(logFormat) else { throw ValidationError("--log-format must be text or json") }
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical")
        }
        guard (1...64).contains(httpThreads) else { throw ValidationError("--http-threads must be 1...64") }
        guard maxThreads >= 1, maxTimers >= 1, maxQueued >= 1, maxTasks >= 1, maxEventClients >= 0 else {
            throw ValidationError("limits must be >= 1")
        }
        guard (1...1_000_000).contains(performHistory), (0...1_000_000).contains(journalSize) else {
            throw ValidationError("--perform-history must be 1...1000000 and --journal-size 0...1000000")
        }
        guard maxBody >= 0, maxConnections >= 1, maxConnectionsPerIp >= 0, maxQueuedRequests >= 1 else {
            throw ValidationError("--max-body, --max-connections and --max-queued-requests must be positive")
        }
        guard maxSeconds.isFinite, maxSeconds > 0, maxSeconds <= 1e8 else {
            throw ValidationError("--max-seconds must be in (0, 1e8] (CF waits forever past about 5e8 s)")
        }
        guard maxWait.isFinite, maxWait > 0, connectionTimeout.isFinite, connectionTimeout > 0 else {
            throw ValidationError("--max-wait and --connection-timeout must be positive")
        }
        guard requestDeadline.isFinite, requestDeadline >= 0.1, requestDeadline <= 86_400 else {
            throw ValidationError("--request-deadline must be 0.1...86400 seconds")
        }
        guard maxPendingRequests >= 1, maxQueryParams >= 1, maxHeaders >= 1 else {
            throw ValidationError("--max-pending-requests, --max-query-params and --max-headers must be >= 1")
        }
        guard token.isEmpty || tokenFile.isEmpty else {
            throw ValidationError("give the token once: --token (RUNLOOPD_TOKEN) or --token-file (RUNLOOPD_TOKEN_FILE)")
        }
        guard !noAuth || (token.isEmpty && tokenFile.isEmpty) else {
            throw ValidationError("--no-auth contradicts the token given with --token or --token-file")
        }
        if !token.isEmpty, token.count < Self.minimumTokenLength {
            throw ValidationError(Self.shortToken("--token (RUNLOOPD_TOKEN)"))
        }
        guard (1...100_000).contains(turnRingSize), (turnRingSize...100_000).contains(maxTurnRingSize),
            (0...1024).contains(maxCalloutsPerTurn),
            (1...1_000_000).contains(maxWarnings)
        else {
            throw ValidationError(
                "--turn-ring-size must be 1...100000, --max-turn-ring-size turn-ring-size...100000, --max-callouts-per-turn 0...1024, --max-warnings 1...1000000"
            )
        }
        _ = try parsedStallThresholds()
        for (name, value) in [
            ("--lost-wakeup-after", lostWakeupAfter), ("--idle-perform-after", idlePerformAfter),
            ("--mode-never-runs-after", modeNeverRunsAfter), ("--busy-window", busyWindow),
        ] {
            guard value.isFinite, value > 0, value <= 86_400 else {
                throw ValidationError("\(name) must be in (0, 86400] seconds")
            }
        }
        guard drainDelay.isFinite, (0...3600).contains(drainDelay) else {
            throw ValidationError("--drain-delay must be 0...3600 seconds")
        }
        guard busyThreshold.isFinite, busyThreshold > 0, busyThreshold <= 1 else {
            throw ValidationError("--busy-threshold must be in (0, 1]")
        }
        _ = try storeOptions()
        do {
            _ = try RequestGuard(boundHost: host, allowedHosts: allowedHost, allowedOrigins: allowedOrigin)
        } catch {
            throw ValidationError(error.description)
        }
    }

    /// The history store flags, checked.
    func storeOptions() throws(ValidationError) -> StoreOptions {
        var options = StoreOptions()
        options.enabled = !noStore
        options.url = store
        options.dataDirectory = dataDir
        guard let age = parseDuration(retention) else {
            throw ValidationError("--retention takes a duration such as 7d, 12h or 30m (0: no age limit)")
        }
        guard let size = parseByteSize(retentionSize) else {
            throw ValidationError("--retention-size takes a size such as 256MB or 1GB (0: no size limit)")
        }
        options.retention = Retention(maxAge: age > 0 ? age : nil, maxBytes: size > 0 ? size : nil)
        guard let scope = RetentionScope(rawValue: retentionScope) else {
            throw ValidationError("--retention-scope must be instance or fleet")
        }
        options.retentionScope = scope
        options.passwordFile = storePasswordFile.isEmpty ? nil : storePasswordFile
        if let file = options.passwordFile, !FileManager.default.isReadableFile(atPath: file) {
            throw ValidationError("--store-password-file: cannot read \(file)")
        }
        guard (1...10_000_000).contains(storeQueue), (1...1_000_000).contains(replayLimit) else {
            throw ValidationError("--store-queue must be 1...10000000 and --replay-limit 1...1000000")
        }
        options.queueCapacity = storeQueue
        options.replayLimit = replayLimit
        guard storeFlushInterval.isFinite, (0.001...60).contains(storeFlushInterval), heartbeatInterval.isFinite,
            (0.1...3600).contains(heartbeatInterval)
        else {
            throw ValidationError(
                "--store-flush-interval must be 0.001...60 seconds and --heartbeat-interval 0.1...3600")
        }
        guard storeTimeout.isFinite, (0.1...600).contains(storeTimeout) else {
            throw ValidationError("--store-timeout must be 0.1...600 seconds")
        }
        options.queryTimeout = storeTimeout
        options.connectTimeout = min(storeTimeout, options.connectTimeout)
        options.flushInterval = storeFlushInterval
        options.heartbeatInterval = heartbeatInterval
        options.instanceId = instanceId.isEmpty ? nil : instanceId
        options.advertiseURL = advertiseUrl.isEmpty ? nil : advertiseUrl
        if let id = options.instanceId {
            guard id.utf8.count <= 128, id.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7f }) else {
                throw ValidationError("--instance-id must be 1 to 128 printable ASCII characters without spaces")
            }
        }
        if options.enabled {
            do {
                _ = try options.makeStore(logger: Logger(label: "runloopd"))
            } catch {
                throw ValidationError("\(error)")
            }
        }
        return options
    }

    /// `--stall-thresholds` in seconds: one to three increasing positive numbers of milliseconds.
    func parsedStallThresholds() throws(ValidationError) -> [Double] {
        let parts = stallThresholds.split(separator: ",").map { Double($0.trimmingCharacters(in: .whitespaces)) }
        guard (1...3).contains(parts.count), parts.allSatisfy({ ($0 ?? 0) > 0 && ($0 ?? 0).isFinite }) else {
            throw ValidationError("--stall-thresholds takes 1 to 3 positive millisecond values, e.g. 100,250,500")
        }
        let values = parts.map { $0! / 1000 }
        guard values == values.sorted(), Set(values).count == values.count else {
            throw ValidationError("--stall-thresholds must increase (micro-hang < hang < severe)")
        }
        return values
    }

    /// The token from `--token` or `--token-file` (nil when neither is given).
    func resolvedToken() throws(ValidationError) -> String? {
        if !token.isEmpty { return token }
        guard !tokenFile.isEmpty else { return nil }
        guard let data = FileManager.default.contents(atPath: tokenFile) else {
            throw ValidationError("cannot read --token-file \(tokenFile)")
        }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty else { throw ValidationError("--token-file \(tokenFile) is empty") }
        guard text.count >= Self.minimumTokenLength else {
            throw ValidationError(Self.shortToken("the token in --token-file \(tokenFile)"))
        }
        return text
    }

    /// The shortest token accepted: a short one is guessed by anyone who can connect.
    static let minimumTokenLength = 16

    static func shortToken(_ what: String) -> String {
        "\(what) is shorter than \(minimumTokenLength) characters: a short token is easy to guess; "
            + "make one with: head -c 24 /dev/urandom | base64"
    }

    /// The level named in `--log-level-file`.
    func fileLogLevel() throws(ValidationError) -> Logger.Level {
        guard let data = FileManager.default.contents(atPath: logLevelFile) else {
            throw ValidationError("cannot read --log-level-file \(logLevelFile)")
        }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard let level = Logger.Level(rawValue: text.lowercased()) else {
            throw ValidationError(
                "--log-level-file \(logLevelFile) must hold one of trace, debug, info, notice, warning, error, critical"
            )
        }
        return level
    }

    func run() throws {
        // Block SIGINT, SIGTERM and SIGHUP before any thread starts (threads
        // inherit the mask; the log writer starts with the first line), then
        // wait for them on the main thread: no other thread ever takes one
        // and dies of its default action.
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGINT)
        sigaddset(&signals, SIGTERM)
        sigaddset(&signals, SIGHUP)
        pthread_sigmask(SIG_BLOCK, &signals, nil)
        signal(SIGPIPE, SIG_IGN)
        let json = logFormat == "json"
        let format: LogFormat = json ? .json : .text
        var level = Logger.Level(rawValue: logLevel) ?? .info
        var levelProblem: String?
        if !logLevelFile.isEmpty {
            do {
                level = try fileLogLevel()
            } catch {
                levelProblem = error.message
            }
        }
        LogLevelSwitch.shared.set(level)
        LoggingSystem.bootstrap { label in SinkLogHandler(label: label, format: format) }
        LogSink.standardError.formatAccessLines(SinkLogHandler.accessLines(format))
        LogSink.standardError.formatNotes { message in
            json
                ? JSONLogLine.line(
                    at: Date(), level: .warning, label: "runloopd", message: message, source: "runloopd", fields: [])
                : TextLogLine.line(
                    at: Date(), level: .warning, label: "runloopd", fields: [], source: "runloopd", message: message)
        }
        // Lines still queued for the log writer are written on every way out.
        atexit { LogSink.standardError.flush() }
        defer { LogSink.standardError.flush() }
        let logger = Logger(label: "runloopd")
        if let levelProblem {
            logger.critical("cannot start: \(levelProblem)")
            throw ExitCode(1)
        }
        let secret: String?
        do {
            secret = try resolvedToken()
        } catch {
            logger.critical("cannot start: \(error.message)")
            throw ExitCode(1)
        }
        if !tokenFile.isEmpty { warnIfReadableByOthers(tokenFile, logger: logger) }
        let loopback = RequestGuard.isLoopback(host)
        if secret == nil && !loopback {
            if !noAuth {
                logger.critical(
                    "cannot start: refusing to serve an open control plane on \(host) without a token. Set one with RUNLOOPD_TOKEN (or --token), or mount it as a file and give --token-file (RUNLOOPD_TOKEN_FILE); or bind to 127.0.0.1; or, to run open on purpose, pass --no-auth (RUNLOOPD_NO_AUTH=1)."
                )
                throw ExitCode(1)
            }
            logger.warning(
                "LISTENING ON \(host) WITHOUT A TOKEN (--no-auth): anyone who can reach this port controls every run loop."
            )
        }
        if allowedHost.contains(where: { $0.trimmingCharacters(in: .whitespaces) == "*" }) {
            logger.warning(
                "--allowed-host '*': the Host check is off, so a page whose DNS name is rebound to this address can drive runloopd as its own origin."
            )
        }
        raiseDescriptorLimit(logger: logger)

        var config = ServiceConfiguration()
        config.http.host = host
        config.http.port = port
        config.http.httpThreads = httpThreads
        config.http.maxBodyBytes = maxBody
        config.http.connectionLimit = maxConnections
        config.http.perIPConnectionLimit = maxConnectionsPerIp
        config.http.connectionTimeout = connectionTimeout
        config.http.requestDeadline = requestDeadline
        config.http.maxPendingRequests = maxPendingRequests
        config.http.maxQueryParameters = maxQueryParams
        config.http.maxHeaders = maxHeaders
        config.limits.maxWorkers = maxThreads
        config.limits.maxTimersPerWorker = maxTimers
        config.limits.maxQueuedCommands = maxQueued
        config.limits.taskCapacity = maxTasks
        config.limits.performHistory = performHistory
        config.limits.maxSeconds = maxSeconds
        config.api.maxWaitSeconds = maxWait
        // No request waits longer than --max-wait, not even for a stop or an end.
        config.api.stopWaitSeconds = min(config.api.stopWaitSeconds, maxWait)
        config.api.endWaitSeconds = min(config.api.endWaitSeconds, maxWait)
        config.api.maxEventClients = maxEventClients
        config.maxQueuedRequests = maxQueuedRequests
        config.publicDirectory = publicDir
        config.journalSize = journalSize
        config.experimentsDirectory = experimentsDir
        config.token = secret
        config.readOnly = readOnly
        config.allowedHosts = allowedHost
        config.allowedOrigins = allowedOrigin
        config.diagnostics.tracing = trace
        config.diagnostics.turnRingSize = turnRingSize
        config.diagnostics.maxTurnRingSize = maxTurnRingSize
        config.diagnostics.maxCalloutsPerTurn = maxCalloutsPerTurn
        config.diagnostics.stallThresholds = (try? parsedStallThresholds()) ?? [0.1, 0.25, 0.5]
        config.diagnostics.lostWakeupAfter = lostWakeupAfter
        config.diagnostics.idlePerformAfter = idlePerformAfter
        config.diagnostics.modeNeverRunsAfter = modeNeverRunsAfter
        config.diagnostics.busyWindow = busyWindow
        config.diagnostics.busyThreshold = busyThreshold
        config.diagnostics.maxWarnings = maxWarnings
        config.store = (try? storeOptions()) ?? config.store

        if !setup.isEmpty {
            do {
                config.setup = try Setup.load(path: setup)
            } catch {
                logger.critical("cannot start: \(error)")
                throw ExitCode(Self.setupExitCode)
            }
        }

        let service = RunLoopService(configuration: config, logger: logger, accessLog: LogSink.standardError)
        do {
            try service.start()
        } catch let error as Setup.Failure {
            logger.critical("cannot start: \(error)")
            throw ExitCode(Self.setupExitCode)
        } catch {
            logger.critical("cannot start: \(error)")
            throw ExitCode(1)
        }
        if !portFile.isEmpty {
            // Written to a temporary name, then renamed: a reader never sees a partial file.
            let temporary = portFile + ".tmp"
            do {
                try Data("\(service.port)\n".utf8).write(to: URL(fileURLWithPath: temporary))
                guard rename(temporary, portFile) == 0 else {
                    throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: portFile])
                }
            } catch {
                logger.critical("cannot write --port-file \(portFile): \(error)")
                service.stop()
                throw ExitCode(1)
            }
            logger.info(
                "port file written", metadata: ["path": "\(portFile)", "port": .stringConvertible(Int(service.port))])
        }
        #if DEBUG
            // Test-only fault switches (absent from release builds): how the stop
            // watchdog is proven to end a stop that a stuck lock would hang.
            if let fault = ProcessInfo.processInfo.environment["RUNLOOPD_TEST_FAULT"], !fault.isEmpty {
                logger.warning("test fault injected", metadata: ["fault": "\(fault)"])
                service.injectTestFault(fault)
            }
        #endif
        var received: Int32 = 0
        while true {
            sigwait(&signals, &received)
            guard received == SIGHUP else { break }
            reload(service, logger: logger)
        }
        logger.info("signal received", metadata: ["signal": "\(received == SIGINT ? "SIGINT" : "SIGTERM")"])
        if received == SIGTERM, drainDelay > 0 {
            drain(service, signals: signals, logger: logger)
        }
        // Past the stop's bound and a grace, this thread ends the process,
        // whatever is stuck; armed once the drain is over, so the drain never
        // counts against the stop's bound.
        var stopSignals = sigset_t()
        sigemptyset(&stopSignals)
        sigaddset(&stopSignals, SIGINT)
        sigaddset(&stopSignals, SIGTERM)
        StopWatchdog.arm(bound: RunLoopService.stopBound, signals: stopSignals, json: json)
        service.stop(timeout: RunLoopService.stopBound)
    }
}

extension Serve {
    /// SIGTERM's drain: `/readyz` answers 503 at once while every other
    /// request is served as before, for `--drain-delay` seconds, so a load
    /// balancer stops sending new requests before the listener closes. A
    /// second SIGTERM or a SIGINT ends it early; a SIGHUP meanwhile is
    /// handled as always. The main thread waits in `sigtimedwait` (no polling).
    func drain(_ service: RunLoopService, signals: sigset_t, logger: Logger) {
        service.beginDrain()
        logger.info(
            "drain started: /readyz answers 503, requests are still served",
            metadata: ["drainDelaySeconds": .stringConvertible(drainDelay)])
        let started = Monotonic.now()
        let end = started + drainDelay
        var set = signals
        var why = "the drain delay passed"
        while true {
            let left = end - Monotonic.now()
            guard left > 0 else { break }
            var timeout = timespec(tv_sec: Int(left), tv_nsec: Int((left - left.rounded(.down)) * 1e9))
            let received = sigtimedwait(&set, nil, &timeout)
            if received == SIGHUP {
                reload(service, logger: logger)
                continue
            }
            if received == SIGTERM || received == SIGINT {
                why = "a second \(received == SIGINT ? "SIGINT" : "SIGTERM") ended it early"
                break
            }
            // EINTR: another signal woke it; the deadline is recomputed.
            if received == -1 && errno == EINTR { continue }
            break
        }
        logger.info(
            "drain ended: \(why); stopping",
            metadata: ["seconds": .stringConvertible(((Monotonic.now() - started) * 1000).rounded() / 1000)])
    }

    /// SIGHUP: rereads `--token-file` (a rotated secret) and `--log-level-file`
    /// and says in one line what changed (never the token itself); never stops
    /// the process. A file that cannot be read, a token too short or a level
    /// file naming no level keeps what was there, with a warning.
    func reload(_ service: RunLoopService, logger: Logger) {
        var metadata: Logger.Metadata = [:]
        if tokenFile.isEmpty {
            metadata["token"] = "not from --token-file"
        } else {
            do {
                guard let token = try resolvedToken() else { return }
                warnIfReadableByOthers(tokenFile, logger: logger)
                metadata["tokenRotated"] = .stringConvertible(service.replaceToken(token))
            } catch {
                logger.warning("SIGHUP: kept the old token: \(error.message)", metadata: ["path": "\(tokenFile)"])
                metadata["tokenRotated"] = .stringConvertible(false)
            }
        }
        var newLevel: Logger.Level?
        if logLevelFile.isEmpty {
            metadata["logLevel"] = "not from --log-level-file"
        } else {
            let current = LogLevelSwitch.shared.level
            do {
                let level = try fileLogLevel()
                newLevel = level
                metadata["logLevel"] = "\(level)"
                metadata["logLevelBefore"] = "\(current)"
                metadata["logLevelChanged"] = .stringConvertible(current != level)
            } catch {
                logger.warning("SIGHUP: kept the log level: \(error.message)", metadata: ["path": "\(logLevelFile)"])
                metadata["logLevel"] = "\(current)"
                metadata["logLevelChanged"] = .stringConvertible(false)
            }
        }
        // At notice, under whichever of the two levels shows more: a level
        // raised above notice is set after the line, a lower one before it.
        if let newLevel, newLevel <= .notice { LogLevelSwitch.shared.set(newLevel) }
        logger.notice("SIGHUP: reloaded", metadata: metadata)
        if let newLevel, newLevel > .notice { LogLevelSwitch.shared.set(newLevel) }
    }
}

/// Warns when the token file can be read by every user of the machine. A
/// warning, not a refusal: Kubernetes mounts a Secret 0644 unless its
/// `defaultMode` says otherwise and Docker secrets are 0444, inside a
/// container where no other user runs; refusing would break those standard
/// deployments, while on a shared host the line tells what to fix.
func warnIfReadableByOthers(_ path: String, logger: Logger) {
    var info = stat()
    guard stat(path, &info) == 0, info.st_mode & S_IROTH != 0 else { return }
    logger.warning(
        "--token-file \(path) is readable by every user (mode \(String(info.st_mode & 0o777, radix: 8))): anyone on this machine can read the token; chmod 600 it (in Kubernetes, set the Secret volume's defaultMode: 0400)",
        metadata: ["path": "\(path)", "mode": "\(String(info.st_mode & 0o777, radix: 8))"])
}

/// Each worker costs descriptors (its loop's eventfd, epoll and timerfds, a
/// port keep-alive): raise the soft RLIMIT_NOFILE to the hard limit at start.
func raiseDescriptorLimit(logger: Logger) {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
    let before = limit.rlim_cur
    guard limit.rlim_cur < limit.rlim_max else { return }
    limit.rlim_cur = limit.rlim_max
    if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 {
        logger.debug(
            "raised RLIMIT_NOFILE",
            metadata: ["from": .stringConvertible(UInt64(before)), "to": .stringConvertible(UInt64(limit.rlim_cur))])
    }
}

/// `RUNLOOPD_*` environment variables.
enum Env {
    static func string(_ name: String) -> String? {
        ProcessInfo.processInfo.environment["RUNLOOPD_" + name].flatMap { $0.isEmpty ? nil : $0 }
    }

    static func integer(_ name: String) -> Int? { string(name).flatMap { Int($0) } }

    static func double(_ name: String) -> Double? { string(name).flatMap { Double($0) } }

    /// `1`, `true` or `yes` (any case) is true; anything else set is false.
    static func bool(_ name: String) -> Bool? { string(name).map { ["1", "true", "yes"].contains($0.lowercased()) } }

    /// A comma-separated list (empty items dropped).
    static func list(_ name: String) -> [String] {
        (string(name) ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter {
            !$0.isEmpty
        }
    }
}
