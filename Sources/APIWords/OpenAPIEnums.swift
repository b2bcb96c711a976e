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
    public static func fill(_ document: String) throws(Failure) -> String {
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
}
