import ArgumentParser
import RunLoopServer

/// How the process starts and stops: the setup applied at start, the port
/// file, the drain, the journal and the experiments folder.
struct OperationsOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "A setup file (JSON) whose threads, sources, timers, observers, tasks and performs are created at start.",
            discussion:
                "Applied through the API's own routes once listening; until it is done /readyz is not ready and /api answers 503. A file that cannot be read or a step the API refuses exits with status 78 (EX_CONFIG) before the API is served. Format: docs/setup.md; GET /api/setup exports the live state in it."
        ))
    var setup = Setting("", env: "SETUP")

    @Option(help: "Write the bound port to this file once listening (for scripts and tests with --port 0).")
    var portFile = Setting("", env: "PORT_FILE")

    @Option(
        help: ArgumentHelp(
            "How long SIGTERM keeps serving with /readyz at 503 before the stop begins (0: stop at once; at most 1h).",
            discussion:
                "Lets a load balancer take the instance out before it stops listening. A second SIGTERM (or SIGINT) ends the drain early; SIGINT alone stops at once. The stop itself is then bounded by 4 s."
        ))
    var drainDelay = Setting(Seconds(5), env: "DRAIN_DELAY")

    @Option(help: "State-changing requests the journal keeps for GET /api/journal (0: no journal; at most 1000000).")
    var journalSize = Setting(Count(ServiceConfiguration().journalSize), env: "JOURNAL_SIZE")

    @Option(
        help: ArgumentHelp(
            "Bytes of request bodies and answers the journal holds, at most (the oldest requests make room).",
            discussion:
                "Bounds the journal's memory whatever --journal-size says: a request larger than this is kept alone. An export says how many requests after its since= were dropped (missed)."
        ))
    var journalBytes = Setting(ByteSize(Int64(ServiceConfiguration().journalBytes)), env: "JOURNAL_BYTES")

    @Option(help: "Bytes of request bodies and answers one GET /api/journal page reads (the rest: since=lastSeq).")
    var maxExportBytes = Setting(ByteSize(Int64(ServiceConfiguration().maxExportBytes)), env: "MAX_EXPORT_BYTES")

    @Option(help: "A folder of experiment files served by GET /api/experiments instead of those compiled in.")
    var experimentsDir = Setting(ServiceConfiguration().experimentsDirectory, env: "EXPERIMENTS_DIR")

    mutating func validate() throws {
        try resolve(
            \.setup, \.portFile, \.drainDelay, \.journalSize, \.journalBytes, \.maxExportBytes, \.experimentsDir)
        try drainDelay.check("--drain-delay", Seconds(0)...Seconds(3600), "0...3600 seconds")
        try journalSize.check("--journal-size", 0...1_000_000, "0...1000000")
        try journalBytes.check("--journal-bytes", ByteSize(65536)...ByteSize(4_000_000_000), "64KB...4GB")
        try maxExportBytes.check("--max-export-bytes", ByteSize(65536)...ByteSize(1_000_000_000), "64KB...1GB")
    }

    /// The journal's and the experiments' part of the configuration.
    func apply(to config: inout ServiceConfiguration) {
        config.journalSize = journalSize.count
        config.journalBytes = Int(journalBytes.bytes)
        config.maxExportBytes = Int(maxExportBytes.bytes)
        config.experimentsDirectory = experimentsDir.value
    }
}
