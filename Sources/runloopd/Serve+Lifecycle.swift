import ArgumentParser
import Foundation
import Logging
import MicroHTTP
import RunLoopCore
import RunLoopServer

extension Serve {
    /// The token at start (from `--token` or `--token-file`); refuses an open
    /// control plane on a non-loopback address unless `--no-auth`.
    func startToken(logger: Logger) throws -> String? {
        let secret: String?
        do {
            secret = try access.resolvedToken()
        } catch {
            logger.critical("cannot start: \(error.message)")
            throw ExitCode(1)
        }
        let tokenFile = access.tokenFile.value
        if !tokenFile.isEmpty { warnIfReadableByOthers(tokenFile, logger: logger) }
        let host = http.host.value
        if secret == nil && !RequestGuard.isLoopback(host) {
            if !access.noAuth {
                logger.critical(
                    "cannot start: refusing to serve an open control plane on \(host) without a token. Set one with RUNLOOPD_TOKEN (or --token), or mount it as a file and give --token-file (RUNLOOPD_TOKEN_FILE); or bind to 127.0.0.1; or, to run open on purpose, pass --no-auth (RUNLOOPD_NO_AUTH=1)."
                )
                throw ExitCode(1)
            }
            logger.warning(
                "LISTENING ON \(host) WITHOUT A TOKEN (--no-auth): anyone who can reach this port controls every run loop."
            )
        }
        if access.allowedHost.contains(where: { $0.trimmingCharacters(in: .whitespaces) == "*" }) {
            logger.warning(
                "--allowed-host '*': the Host check is off, so a page whose DNS name is rebound to this address can drive runloopd as its own origin."
            )
        }
        return secret
    }

    /// `--port-file`: written to a temporary name, then renamed, so a reader
    /// never sees a partial file.
    func writePortFile(_ service: RunLoopService, logger: Logger) throws {
        let portFile = operations.portFile.value
        guard !portFile.isEmpty else { return }
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

    /// Waits for the signals: SIGHUP reloads, SIGTERM drains then stops,
    /// SIGINT stops at once.
    func serveUntilStopped(_ service: RunLoopService, signals: sigset_t, json: Bool, logger: Logger) {
        var signals = signals
        var received: Int32 = 0
        while true {
            sigwait(&signals, &received)
            guard received == SIGHUP else { break }
            reload(service, logger: logger)
        }
        logger.info("signal received", metadata: ["signal": "\(received == SIGINT ? "SIGINT" : "SIGTERM")"])
        if received == SIGTERM, operations.drainDelay.seconds > 0 {
            drain(service, signals: signals, logger: logger)
        }
        // Past the stop's bound and a grace, this thread ends the process,
        // whatever is stuck; armed once the drain is over, so the drain never
        // counts against the stop's bound.
        StopWatchdog.armForStop(bound: RunLoopService.stopBound, json: json)
        service.stop(timeout: RunLoopService.stopBound)
    }

    /// SIGTERM's drain: `/readyz` answers 503 at once while every other
    /// request is served as before, for `--drain-delay` seconds, so a load
    /// balancer stops sending new requests before the listener closes. A
    /// second SIGTERM or a SIGINT ends it early; a SIGHUP meanwhile is
    /// handled as always. The main thread waits in `sigtimedwait` (no polling).
    func drain(_ service: RunLoopService, signals: sigset_t, logger: Logger) {
        let drainDelay = operations.drainDelay.seconds
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
    /// and says in one line what changed (never the token itself):
    /// `SIGHUP: reloaded` when the token or the level changed, else
    /// `SIGHUP: nothing changed`; never stops the process. A file that cannot be read, a token too short or a level
    /// file naming no level keeps what was there, with a warning.
    func reload(_ service: RunLoopService, logger: Logger) {
        var metadata: Logger.Metadata = [:]
        var changed = false
        let tokenFile = access.tokenFile.value
        if tokenFile.isEmpty {
            metadata["token"] = "not from --token-file"
        } else {
            do {
                guard let token = try access.resolvedToken() else { return }
                warnIfReadableByOthers(tokenFile, logger: logger)
                let rotated = service.replaceToken(token)
                changed = changed || rotated
                metadata["tokenRotated"] = .stringConvertible(rotated)
            } catch {
                logger.warning("SIGHUP: kept the old token: \(error.message)", metadata: ["path": "\(tokenFile)"])
                metadata["tokenRotated"] = .stringConvertible(false)
            }
        }
        var newLevel: Logger.Level?
        if logging.logLevelFile.value.isEmpty {
            metadata["logLevel"] = "not from --log-level-file"
        } else {
            let current = LogLevelSwitch.shared.level
            do {
                let level = try logging.fileLogLevel()
                newLevel = level
                metadata["logLevel"] = "\(level)"
                metadata["logLevelBefore"] = "\(current)"
                metadata["logLevelChanged"] = .stringConvertible(current != level)
                changed = changed || current != level
            } catch {
                logger.warning(
                    "SIGHUP: kept the log level: \(error.message)",
                    metadata: ["path": "\(logging.logLevelFile.value)"])
                metadata["logLevel"] = "\(current)"
                metadata["logLevelChanged"] = .stringConvertible(false)
            }
        }
        // At notice, under whichever of the two levels shows more: a level
        // raised above notice is set after the line, a lower one before it.
        if let newLevel, newLevel <= .notice { LogLevelSwitch.shared.set(newLevel) }
        logger.notice(changed ? "SIGHUP: reloaded" : "SIGHUP: nothing changed", metadata: metadata)
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
