import Foundation

// The tool of the EmbedOpenAPI build plugin:
//   embed-openapi <openapi.json> <OpenAPISpec.swift>
// writes `enum OpenAPISpec { static let json = ... }`, the document verbatim
// (without its final newline) in a raw string literal.

let arguments = CommandLine.arguments
guard arguments.count == 3 else {
    FileHandle.standardError.write(Data("usage: embed-openapi <openapi.json> <OpenAPISpec.swift>\n".utf8))
    exit(2)
}
do {
    var document = try String(contentsOfFile: arguments[1], encoding: .utf8)
    if document.hasSuffix("\n") { document.removeLast() }
    // The raw literal's delimiter grows until nothing in the document can
    // end it early or start an interpolation.
    var hashes = "#"
    while document.contains("\"\"\"" + hashes) || document.contains("\\" + hashes) {
        hashes += "#"
    }
    let source = """
        // Generated at build time from openapi.json by the EmbedOpenAPI plugin.

        /// The OpenAPI document `openapi.json`, compiled into the binary.
        enum OpenAPISpec {
            /// The text of `openapi.json` (without its final newline).
            static let json = \(hashes)\"\"\"
        \(document)
        \"\"\"\(hashes)
        }

        """
    try source.write(toFile: arguments[2], atomically: true, encoding: .utf8)
} catch {
    FileHandle.standardError.write(Data("embed-openapi: \(error)\n".utf8))
    exit(1)
}
