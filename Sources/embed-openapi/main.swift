#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

// The tool of the EmbedOpenAPI build plugin:
//   embed-openapi <openapi.json> <OpenAPISpec.swift>
// writes `enum OpenAPISpec { static let json = ... }`, the document verbatim
// (without its final newline) in a raw string literal. Plain C I/O: no
// Foundation for a build step.

/// Writes `line` to standard error (fd 2: the C `stderr` global is not concurrency-safe).
func say(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}

func fail(_ message: String) -> Never {
    say("embed-openapi: \(message)")
    exit(1)
}

func readFile(_ path: String) -> String {
    guard let file = fopen(path, "rb") else { fail("cannot open \(path)") }
    defer { fclose(file) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let count = fread(&buffer, 1, buffer.count, file)
        if count == 0 { break }
        bytes += buffer[0..<count]
    }
    guard ferror(file) == 0 else { fail("cannot read \(path)") }
    return String(decoding: bytes, as: UTF8.self)
}

func writeFile(_ text: String, to path: String) {
    guard let file = fopen(path, "wb") else { fail("cannot create \(path)") }
    let bytes = Array(text.utf8)
    let written = fwrite(bytes, 1, bytes.count, file)
    guard fclose(file) == 0, written == bytes.count else { fail("cannot write \(path)") }
}

let arguments = CommandLine.arguments
guard arguments.count == 3 else {
    say("usage: embed-openapi <openapi.json> <OpenAPISpec.swift>")
    exit(2)
}
var document = readFile(arguments[1])
while document.hasSuffix("\n") { document.removeLast() }
// The raw literal's delimiter grows until nothing in the document can end it
// early or start an interpolation.
var hashes = "#"
while document.contains("\"\"\"" + hashes) || document.contains("\\" + hashes) {
    hashes += "#"
}
writeFile(
    """
    // Generated at build time from openapi.json by the EmbedOpenAPI plugin.

    /// The OpenAPI document `openapi.json`, compiled into the binary.
    enum OpenAPISpec {
        /// The text of `openapi.json` (without its final newline).
        static let json = \(hashes)\"\"\"
    \(document)
    \"\"\"\(hashes)
    }

    """, to: arguments[2])
