import Foundation
import Logging
import MicroHTTP

/// One answered request, as the access log records it.
public struct AccessLogEntry: Sendable {
    /// The request's method.
    public var method: String
    /// Its path (no query).
    public var path: String
    /// The answer's status.
    public var status: Int
    /// Its `X-Request-Id`.
    public var requestId: String
    /// The metrics route label.
    public var route: String
    /// Seconds from arrival to answer.
    public var seconds: Double
    /// The client, as bytes until the line is written.
    public var peer: PeerAddress?
    /// The client's address (made when read: on the log writer's thread).
    public var remote: String? { peer?.text }
    /// When it was answered.
    public var at: Date
    /// The line's level: `debug` for probes and scrapes (`/healthz`, `/readyz`,
    /// `/metrics`), `info` for everything else.
    public var level: Logger.Level = .info

    /// The duration in milliseconds, to the microsecond.
    public var milliseconds: Double { (seconds * 1e6).rounded() / 1000 }

    /// The message of the line: `METHOD /path STATUS`.
    public var message: String { "\(method) \(path) \(status)" }

    /// The line's fields, as a log handler's metadata (the duration and the
    /// status as numbers).
    public var metadata: Logger.Metadata {
        [
            "durationMs": .stringConvertible(milliseconds), "remote": .string(remote ?? "-"),
            "requestId": .string(requestId), "route": .string(route), "status": .stringConvertible(status),
        ]
    }
}

/// Where access-log entries go when not through swift-log: a writer that
/// formats them off the request path (`runloopd`'s log writer thread). It
/// must only queue: it runs on the HTTP and run-loop threads.
public protocol AccessLogWriter: Sendable {
    /// Queues one entry.
    func record(_ entry: AccessLogEntry)
}
