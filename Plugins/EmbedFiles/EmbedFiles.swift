import Foundation
import PackagePlugin

/// Compiles what runloopd serves into the binary at build time, so only the
/// sources are in git and the binary copied alone to an empty folder still
/// serves everything (`--public-dir` and `--experiments-dir` only override):
///
/// - `API/openapi.json` of the target → `OpenAPISpec.json` (one raw string),
///   its enums filled from the Swift words (`APIWords.OpenAPIEnums`);
/// - every file under the package's `Public/` → `EmbeddedPublic.files`;
/// - every `*.json` in the package's `experiments/` → `EmbeddedExperiments.files`.
///
/// The `embed-files` tool writes each as a Swift file in the plugin's work
/// directory. The folders are listed each time the plugin runs (every build),
/// so a new file is picked up without touching the package.
@main
struct EmbedFiles: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let tool = try context.tool(named: "embed-files").url
        let work = context.pluginWorkDirectoryURL
        let package = context.package.directoryURL
        let openapi = target.directoryURL.appending(path: "API/openapi.json")
        var commands: [Command] = [
            .buildCommand(
                displayName: "Embedding openapi.json",
                executable: tool,
                arguments: ["openapi", path(openapi), path(work.appending(path: "OpenAPISpec.swift")), "OpenAPISpec"],
                inputFiles: [openapi],
                outputFiles: [work.appending(path: "OpenAPISpec.swift")]
            )
        ]
        for (folder, name, recursive, suffix) in [
            ("Public", "EmbeddedPublic", true, ""), ("experiments", "EmbeddedExperiments", false, ".json"),
        ] {
            let root = package.appending(path: folder)
            let names = files(under: root, recursive: recursive).filter { $0.hasSuffix(suffix) }
            let output = work.appending(path: "\(name).swift")
            commands.append(
                .buildCommand(
                    displayName: "Embedding \(folder)/ (\(names.count) files)",
                    executable: tool,
                    arguments: ["folder", path(root), path(output), name] + names,
                    inputFiles: names.map { root.appending(path: $0) },
                    outputFiles: [output]
                ))
        }
        return commands
    }

    private func path(_ url: URL) -> String { url.path(percentEncoded: false) }

    /// The regular files under `root` as paths relative to it, sorted; hidden
    /// names (`.DS_Store`, editors' `.swp`) are left out, as the server would
    /// refuse them anyway.
    private func files(under root: URL, recursive: Bool) -> [String] {
        let manager = FileManager.default
        guard let names = try? manager.contentsOfDirectory(atPath: path(root)) else { return [] }
        var result: [String] = []
        for name in names where !name.hasPrefix(".") {
            var isDirectory: ObjCBool = false
            guard manager.fileExists(atPath: path(root.appending(path: name)), isDirectory: &isDirectory) else {
                continue
            }
            if isDirectory.boolValue {
                if recursive {
                    result += files(under: root.appending(path: name), recursive: true).map { "\(name)/\($0)" }
                }
            } else {
                result.append(name)
            }
        }
        return result.sorted()
    }
}
