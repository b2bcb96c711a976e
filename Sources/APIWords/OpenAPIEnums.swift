/// openapi.json's enums that are made from the Swift words at build time.
///
/// In the checked-in openapi.json such an enum is an annotation,
/// `"x-runloopd-enum": "WarningCode"`, on its own line in the schema that
/// lists it; `fill` writes the list's `"enum"` right after it. The
/// EmbedFiles build plugin (`embed-files openapi`) fills the document it
/// compiles in, so every server serves the enums of the code it runs, and
/// the contract tests fill the checkout's file the same way before reading it.
/// Plain string work: no Foundation, as it runs in a build step.
public enum OpenAPIEnums {
    /// The annotation's key.
    public static let key = "x-runloopd-enum"

    /// Each annotation's name and the values it stands for, in the order of their cases.
    public static let lists: [String: [String]] = [
        "ErrorCode": ErrorCode.allCases.map(\.rawValue),
        "WarningCode": WarningCode.allCases.map(\.rawValue),
        "ExitCauseCode": ExitCauseCode.allCases.map(\.rawValue),
    ]

    /// Why a document cannot be filled.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// `document` with `"enum": [...]` written after every annotation line (at
    /// its indent, one value a line, as the rest of openapi.json is written).
    /// It also refuses a document in which one object names a key twice:
    /// JSON readers keep one of the two silently (Foundation and Python the
    /// last), so the schema a client validates against would not be the one
    /// written.
    public static func fill(_ document: String) throws(Failure) -> String {
        if let duplicate = duplicateKeys(in: document).first {
            throw Failure(description: "line \(duplicate.line): key \"\(duplicate.key)\" is already in this object")
        }
        var out: [String] = []
        for (number, line) in document.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let indent = String(line.prefix { $0 == " " })
            var rest = line.dropFirst(indent.count)
            let prefix = "\"\(key)\": \""
            guard rest.hasPrefix(prefix) else {
                if line.contains("\"\(key)\"") {
                    throw Failure(description: "line \(number + 1): \(key) must start its own line")
                }
                out.append(String(line))
                continue
            }
            rest = rest.dropFirst(prefix.count)
            let comma = rest.hasSuffix(",")
            if comma { rest = rest.dropLast() }
            guard rest.hasSuffix("\"") else {
                throw Failure(description: "line \(number + 1): \(key)'s value must be one name, alone on the line")
            }
            let name = String(rest.dropLast())
            guard let values = lists[name] else {
                throw Failure(
                    description:
                        "line \(number + 1): no list named \(name) (known: \(lists.keys.sorted().joined(separator: ", ")))"
                )
            }
            out.append(indent + "\"\(key)\": \"\(name)\",")
            out.append(indent + "\"enum\": [")
            for (index, value) in values.enumerated() {
                out.append(indent + "  \"\(value)\"" + (index < values.count - 1 ? "," : ""))
            }
            out.append(indent + "]" + (comma ? "," : ""))
        }
        return out.joined(separator: "\n")
    }

    /// Every key a JSON object names a second time, with the line of the
    /// second (1-based). A scanner of strings, braces and colons: it assumes
    /// the document is otherwise valid JSON (the contract tests parse it).
    public static func duplicateKeys(in document: String) -> [(line: Int, key: String)] {
        var found: [(line: Int, key: String)] = []
        // One entry per open container: nil for an array, the keys seen for an object.
        var open: [Set<String>?] = []
        var line = 1
        var lastString: String?
        var bytes = document.utf8.makeIterator()
        while let byte = bytes.next() {
            switch byte {
            case UInt8(ascii: "\n"): line += 1
            case UInt8(ascii: "\""):
                var text: [UInt8] = []
                while let next = bytes.next(), next != UInt8(ascii: "\"") {
                    text.append(next)
                    if next == UInt8(ascii: "\\"), let escaped = bytes.next() { text.append(escaped) }
                }
                lastString = String(decoding: text, as: UTF8.self)
                continue
            case UInt8(ascii: ":"):
                if let key = lastString, let keys = open.last, var seen = keys {
                    if seen.contains(key) { found.append((line, key)) }
                    seen.insert(key)
                    open[open.count - 1] = seen
                }
            case UInt8(ascii: "{"): open.append(Set<String>())
            case UInt8(ascii: "["): open.append(nil)
            case UInt8(ascii: "}"), UInt8(ascii: "]"): _ = open.popLast()
            default: break
            }
            if ![UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\t"), UInt8(ascii: "\r")].contains(byte) {
                lastString = nil
            }
        }
        return found
    }
}
