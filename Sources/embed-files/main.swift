import APIWords

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

// The tool of the EmbedFiles build plugin (Plugins/EmbedFiles):
//   embed-files string <file> <Out.swift> <Name>
//     writes `enum Name { static let json = ... }`, the file verbatim (without
//     its final newline) in a raw string literal;
//   embed-files openapi <file> <Out.swift> <Name>
//     the same for openapi.json, its `x-runloopd-enum` annotations filled
//     with the Swift words' enums (`OpenAPIEnums.fill`);
//   embed-files folder <root> <Out.swift> <Name> <relative path>...
//     writes `enum Name { static let files: [EmbeddedFile] }`, each file under
//     <root> by its relative path: text as a raw string literal, anything that
//     is not plain UTF-8 text (control characters but tab and newline) as
//     base64. `EmbeddedFile` is the target's own type.
// Plain C I/O: no Foundation for a build step.

/// Writes `line` to standard error (fd 2: the C `stderr` global is not concurrency-safe).
func say(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
}

func fail(_ message: String) -> Never {
    say("embed-files: \(message)")
    exit(1)
}

func readFile(_ path: String) -> [UInt8] {
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
    return bytes
}

func writeFile(_ text: String, to path: String) {
    guard let file = fopen(path, "wb") else { fail("cannot create \(path)") }
    let bytes = Array(text.utf8)
    let written = fwrite(bytes, 1, bytes.count, file)
    guard fclose(file) == 0, written == bytes.count else { fail("cannot write \(path)") }
}

/// `text` as a Swift raw string literal whose value is exactly `text`: the
/// delimiter grows until nothing in the text can end it early or start an
/// interpolation; the newline before the closing delimiter is not part of the value.
func rawLiteral(_ text: String) -> String {
    var hashes = "#"
    while text.contains("\"\"\"" + hashes) || text.contains("\\" + hashes) || text.contains("\"" + hashes) {
        hashes += "#"
    }
    return "\(hashes)\"\"\"\n\(text)\n\"\"\"\(hashes)"
}

/// Whether `bytes` are UTF-8 text a string literal holds as is (tab and newline
/// the only control characters: a carriage return would be normalised away).
func isPlainText(_ bytes: [UInt8]) -> Bool {
    guard String(validating: bytes, as: UTF8.self) != nil else { return false }
    return !bytes.contains { ($0 < 0x20 && $0 != 0x09 && $0 != 0x0A) || $0 == 0x7F }
}

func base64(_ bytes: [UInt8]) -> String {
    let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    var out: [UInt8] = []
    var index = 0
    while index < bytes.count {
        let chunk = bytes[index..<min(index + 3, bytes.count)]
        let b = Array(chunk) + [UInt8](repeating: 0, count: 3 - chunk.count)
        let n = UInt32(b[0]) << 16 | UInt32(b[1]) << 8 | UInt32(b[2])
        for k in 0..<4 {
            out.append(k <= chunk.count ? alphabet[Int((n >> (18 - 6 * UInt32(k))) & 63)] : UInt8(ascii: "="))
        }
        index += 3
    }
    return String(decoding: out, as: UTF8.self)
}

/// A relative path as a Swift string literal (quotes and backslashes escaped).
func quoted(_ text: String) -> String {
    "\"" + text.replacingAll("\\", "\\\\").replacingAll("\"", "\\\"") + "\""
}

extension String {
    func replacingAll(_ target: String, _ replacement: String) -> String {
        var out = ""
        var rest = Substring(self)
        while let range = rest.firstRange(of: target) {
            out += rest[..<range.lowerBound] + replacement
            rest = rest[range.upperBound...]
        }
        return out + rest
    }
}

let arguments = CommandLine.arguments
switch (arguments.count, arguments.count > 1 ? arguments[1] : "") {
case (5, "string"), (5, "openapi"):
    var document = String(decoding: readFile(arguments[2]), as: UTF8.self)
    if arguments[1] == "openapi" {
        do {
            document = try OpenAPIEnums.fill(document)
        } catch {
            fail("\(arguments[2]): \(error)")
        }
    }
    while document.hasSuffix("\n") { document.removeLast() }
    writeFile(
        """
        // Generated at build time by the EmbedFiles plugin.

        /// The file `\(arguments[2].split(separator: "/").last ?? "")`, compiled into the binary.
        enum \(arguments[4]) {
            /// Its text (without its final newline).
            static let json = \(rawLiteral(document))
        }

        """, to: arguments[3])
case (5..., "folder"):
    let root = arguments[2]
    var entries: [String] = []
    for name in arguments[5...] {
        let bytes = readFile(root + "/" + name)
        let entry =
            isPlainText(bytes)
            ? "EmbeddedFile(path: \(quoted(name)), text: \(rawLiteral(String(decoding: bytes, as: UTF8.self))), base64: false)"
            : "EmbeddedFile(path: \(quoted(name)), text: \"\(base64(bytes))\", base64: true)"
        entries.append("        " + entry + ",")
    }
    writeFile(
        """
        // Generated at build time by the EmbedFiles plugin from \(root).

        /// The files of `\(root.split(separator: "/").last ?? "")/`, compiled into the binary.
        enum \(arguments[4]) {
            /// Each file by its path under the folder, sorted.
            static let files: [EmbeddedFile] = [
        \(entries.joined(separator: "\n"))
            ]
        }

        """, to: arguments[3])
default:
    say("usage: embed-files string|openapi <file> <Out.swift> <Name>")
    say("       embed-files folder <root> <Out.swift> <Name> <relative path>...")
    exit(2)
}
