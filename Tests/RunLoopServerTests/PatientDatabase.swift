import GRDB

extension DatabaseQueue {
    /// A connection of a test's own to a history file: it waits (up to
    /// `seconds`) for a lock another connection holds, as runloopd's own do.
    /// A server beside it opens, checkpoints and closes the file on its own
    /// schedule (a store it refuses is tried again after each back-off);
    /// GRDB's default fails at once with "database is locked" then.
    static func patient(
        _ path: String, configuration: Configuration = Configuration(), seconds: Double = 30
    ) throws -> DatabaseQueue {
        var configuration = configuration
        configuration.busyMode = .timeout(seconds)
        return try DatabaseQueue(path: path, configuration: configuration)
    }
}
