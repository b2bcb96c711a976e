import PackagePlugin

/// Compiles `API/openapi.json` of the target into the binary at build time:
/// the `embed-openapi` tool writes `OpenAPISpec.swift` (the document as a raw
/// string literal) into the plugin's work directory, so only the JSON is in
/// git and a statically linked binary copied alone still serves it.
@main
struct EmbedOpenAPI: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let input = target.directoryURL.appending(path: "API/openapi.json")
        let output = context.pluginWorkDirectoryURL.appending(path: "OpenAPISpec.swift")
        return [
            .buildCommand(
                displayName: "Embedding openapi.json",
                executable: try context.tool(named: "embed-openapi").url,
                arguments: [input.path(percentEncoded: false), output.path(percentEncoded: false)],
                inputFiles: [input],
                outputFiles: [output]
            )
        ]
    }
}
