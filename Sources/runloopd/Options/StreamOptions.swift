import ArgumentParser
import RunLoopServer

/// The bounds of paged thread lists and of scoped (`scope=summary`) event streams.
struct StreamOptions: ParsableArguments {
    @Option(help: "Largest limit of GET /api/threads (one page of threads).")
    var maxThreadPage = Setting(Count(APILimits().maxThreadPage), env: "MAX_THREAD_PAGE")

    @Option(help: "Shortest time between two snapshots of a scope=summary event stream, ms (1...60000).")
    var streamSnapshotMs = Setting(Count(APILimits().streamSnapshotMs), env: "STREAM_SNAPSHOT_MS")

    @Option(help: "Most bytes per second one scope=summary event stream is sent, e.g. 1MB (at least 1024).")
    var streamMaxBytes = Setting(ByteSize(Int64(APILimits().streamMaxBytesPerSecond)), env: "STREAM_MAX_BYTES")

    @Option(help: "Most threads one event stream may inspect.")
    var streamMaxInspect = Setting(Count(APILimits().streamMaxInspect), env: "STREAM_MAX_INSPECT")

    mutating func validate() throws {
        try resolve(\.maxThreadPage, \.streamSnapshotMs, \.streamMaxBytes, \.streamMaxInspect)
        try maxThreadPage.check("--max-thread-page", 1..., "at least 1")
        try streamSnapshotMs.check("--stream-snapshot-ms", 1...60_000, "1...60000")
        try streamMaxBytes.check(
            "--stream-max-bytes", ByteSize(1024)...ByteSize(Int64(Int32.max)), "1024...2147483647 bytes")
        try streamMaxInspect.check("--stream-max-inspect", 1..., "at least 1")
    }

    /// The paging and stream part of the configuration.
    func apply(to config: inout ServiceConfiguration) {
        config.api.maxThreadPage = maxThreadPage.count
        config.api.streamSnapshotMs = streamSnapshotMs.count
        config.api.streamMaxBytesPerSecond = Int(streamMaxBytes.bytes)
        config.api.streamMaxInspect = streamMaxInspect.count
    }
}
