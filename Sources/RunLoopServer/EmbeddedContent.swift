import Foundation

/// A file compiled into runloopd by the EmbedFiles build plugin
/// (`Plugins/EmbedFiles`): its path under its folder and its text (base64 when
/// it is not plain UTF-8 text).
struct EmbeddedFile: Sendable {
    let path: String
    let text: String
    let base64: Bool

    /// The file's bytes.
    var bytes: [UInt8] { base64 ? [UInt8](Data(base64Encoded: text) ?? Data()) : Array(text.utf8) }
}

/// What runloopd serves when no folder is named: the dashboard (`Public/`)
/// and the experiments (`experiments/`) as they were when it was built.
/// `--public-dir` and `--experiments-dir` override them. Immutable.
public enum EmbeddedContent {
    /// The dashboard's files by their path under `Public/` (`index.html`, `js/main.js`).
    public static var publicFiles: [String: [UInt8]] {
        Dictionary(EmbeddedPublic.files.map { ($0.path, $0.bytes) }, uniquingKeysWith: { first, _ in first })
    }

    /// The experiment files' names (`testdemo1-empty-mode.json`) and bytes, sorted by name.
    public static var experimentFiles: [(name: String, bytes: [UInt8])] {
        EmbeddedExperiments.files.map { ($0.path, $0.bytes) }
    }
}

/// Where the dashboard and the experiments are served from, for the start-up log.
public struct ServedContent: Sendable, CustomStringConvertible {
    /// "the dashboard compiled in (24 files)" or "/srv/Public".
    public let dashboard: String
    /// "27 experiments compiled in" or "27 experiments from /srv/experiments".
    public let experiments: String

    public var description: String { "dashboard: \(dashboard); \(experiments)" }
}
