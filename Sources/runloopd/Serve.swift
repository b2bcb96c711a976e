import ArgumentParser
import Foundation
import Logging
import MicroHTTP
import RunLoopCore
import RunLoopServer

/// `runloopd serve`: the service. Its options come in groups, one file each
/// under `Options/`; each group reads its flags and `RUNLOOPD_` variables
/// once, in its `validate()`, so a bad value stops the start with exit 64.
struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve the API and the dashboard (the default command).",
        discussion: """
            Every option can also be set with an environment variable: RUNLOOPD_ and the option's name in \
            upper case with underscores (RUNLOOPD_PORT, RUNLOOPD_MAX_THREADS, ...); each option's help names \
            it. A flag on the command line wins. A variable is read as its flag is: a value the flag would \
            refuse stops the start, naming the variable.
            """,
        version: RunLoopService.version
    )

    @OptionGroup(title: "HTTP") var http: HTTPOptions
    @OptionGroup(title: "Paging and event streams") var streams: StreamOptions
    @OptionGroup(title: "Access") var access: AccessOptions
    @OptionGroup(title: "Limits") var limits: LimitOptions
    @OptionGroup(title: "Explainer") var explain: ExplainOptions
    @OptionGroup(title: "History store") var history: HistoryStoreOptions
    @OptionGroup(title: "Logging") var logging: LoggingOptions
    @OptionGroup(title: "Operations") var operations: OperationsOptions

    /// The exit status when `--setup` cannot be read or applied (sysexits' EX_CONFIG).
    static let setupExitCode: Int32 = 78

    /// The checks across groups (each group has checked its own values).
    func validate() throws {
        do {
            _ = try RequestGuard(
                boundHost: http.host.value, allowedHosts: access.allowedHost, allowedOrigins: access.allowedOrigin)
        } catch {
            throw ValidationError(error.description)
        }
    }

    /// The service's configuration these options give (the token is read by
    /// the caller: from a file, at start).
    func serviceConfiguration(token: String?) -> ServiceConfiguration {
        var config = ServiceConfiguration()
        http.apply(to: &config)
        streams.apply(to: &config)
        access.apply(to: &config)
        limits.apply(to: &config)
        operations.apply(to: &config)
        config.diagnostics = explain.diagnostics
        config.store = history.options
        config.token = token
        return config
    }

    func run() throws {
        let signals = Self.blockSignals()
        defer { LogSink.standardError.flush() }
        let json = logging.logFormat.value == .json
        let logger = try startLogging(json: json)
        let secret = try startToken(logger: logger)
        raiseDescriptorLimit(logger: logger)
        var config = serviceConfiguration(token: secret)
        let setupPath = operations.setup.value
        if !setupPath.isEmpty {
            do {
                config.setup = try Setup.load(path: setupPath)
            } catch {
                logger.critical("cannot start: \(error)")
                throw ExitCode(Self.setupExitCode)
            }
        }
        let service = RunLoopService(configuration: config, logger: logger, accessLog: LogSink.standardError)
        // A stop signal while --setup is applied stops it (start returns late).
        let setupWatch = config.setup == nil ? nil : SetupSignalWatch.start(service, json: json, logger: logger)
        var startFailure: Error?
        do {
            try service.start()
        } catch {
            startFailure = error
        }
        // A stop signal during the setup (the start then failed, or the
        // setup ended just as it came): the service is stopped.
        if setupWatch?.finish() != nil {
            logger.info("runloopd stopped while applying --setup")
            return
        }
        if let startFailure {
            logger.critical("cannot start: \(startFailure)")
            throw ExitCode(startFailure is Setup.Failure ? Self.setupExitCode : 1)
        }
        try writePortFile(service, logger: logger)
        #if DEBUG
            // Test-only fault switches (absent from release builds): how the stop
            // watchdog is proven to end a stop that a stuck lock would hang.
            if let fault = ProcessInfo.processInfo.environment["RUNLOOPD_TEST_FAULT"], !fault.isEmpty {
                logger.warning("test fault injected", metadata: ["fault": "\(fault)"])
                service.injectTestFault(fault)
            }
        #endif
        serveUntilStopped(service, signals: signals, json: json, logger: logger)
    }

    /// Blocks SIGINT, SIGTERM and SIGHUP before any thread starts (threads
    /// inherit the mask; the log writer starts with the first line), to wait
    /// for them on the main thread: no other thread ever takes one and dies
    /// of its default action. SIGUSR1 too, not returned: it ends the watch
    /// of `--setup` (`SetupSignalWatch`).
    static func blockSignals() -> sigset_t {
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGINT)
        sigaddset(&signals, SIGTERM)
        sigaddset(&signals, SIGHUP)
        var blocked = signals
        sigaddset(&blocked, SIGUSR1)
        pthread_sigmask(SIG_BLOCK, &blocked, nil)
        signal(SIGPIPE, SIG_IGN)
        return signals
    }

    /// Sets up the log (level, format, the sink's notes); a `--log-level-file`
    /// that cannot be read stops the start.
    func startLogging(json: Bool) throws -> Logger {
        let format: LogFormat = json ? .json : .text
        var level = logging.logLevel.value
        var levelProblem: String?
        if !logging.logLevelFile.value.isEmpty {
            do {
                level = try logging.fileLogLevel()
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
        let logger = Logger(label: "runloopd")
        if let levelProblem {
            logger.critical("cannot start: \(levelProblem)")
            throw ExitCode(1)
        }
        return logger
    }
}
