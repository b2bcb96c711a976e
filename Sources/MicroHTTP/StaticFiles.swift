import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Serves the files under one directory (the dashboard in `Public/`), or a set
/// of files held in memory (the dashboard compiled into the binary), for GET
/// and HEAD.
///
/// `/` and directories map to `index.html`. A path that tries to leave the
/// directory (`..`, `%2e%2e`, NUL bytes, hidden `.names`, symbolic links
/// pointing outside) is answered with 404, as is anything that resolves
/// outside the real root. Immutable; called on libmicrohttpd's threads.
public struct StaticFiles: Sendable {
    /// Default directory, relative to the working directory.
    public static let defaultRoot = "Public"
    /// Default file served for `/` and for directories.
    public static let defaultIndexFile = "index.html"

    /// The directory files are served from ("" when they are held in memory).
    public let root: String
    /// The files held in memory by their path under the root (`js/main.js`),
    /// or nil when they are read from `root`.
    public let files: [String: [UInt8]]?
    /// The file served for a directory.
    public let indexFile: String
    /// How 404 and 405 answers look.
    public let refusals: @Sendable (HTTPRefusal) -> HTTPResponse

    /// Creates a file server for `root`; `refusals` renders its 404 and 405.
    public init(
        root: String = defaultRoot, indexFile: String = defaultIndexFile,
        refusals: @escaping @Sendable (HTTPRefusal) -> HTTPResponse = HTTPRefusal.plainText
    ) {
        self.root = root
        self.files = nil
        self.refusals = refusals
        self.indexFile = indexFile
    }

    /// Creates a file server for `files` held in memory, by their path under
    /// the root (`index.html`, `js/main.js`); `refusals` renders its 404 and 405.
    public init(
        files: [String: [UInt8]], indexFile: String = defaultIndexFile,
        refusals: @escaping @Sendable (HTTPRefusal) -> HTTPResponse = HTTPRefusal.plainText
    ) {
        self.root = ""
        self.files = files
        self.refusals = refusals
        self.indexFile = indexFile
    }

    /// The answer for `request` when it concerns a static file, or `nil` when no
    /// file exists at that path (so a router can try other routes or answer 404).
    ///
    /// Non-`nil` answers: 200 with the file (GET, HEAD), 405 with
    /// `Allow: GET, HEAD` for other methods on an existing file, and a 404 refusal for
    /// paths that are malformed or try to leave the root.
    public func response(for request: HTTPRequest) -> HTTPResponse? {
        switch resolve(request.path) {
        case .rejected:
            return notFound(request.path)
        case .missing:
            return nil
        case .file(let path):
            guard request.method == "GET" || request.method == "HEAD" else {
                return refusals(
                    HTTPRefusal(
                        status: 405, code: .methodNotAllowed,
                        message: "\(request.method) is not allowed on \(request.path)",
                        headers: [("Allow", "GET, HEAD")]))
            }
            guard let data = files?[path] ?? FileManager.default.contents(atPath: path).map({ [UInt8]($0) }) else {
                return notFound(request.path)
            }
            return HTTPResponse(
                status: 200,
                headers: [
                    ("Content-Type", Self.contentType(forPath: path)),
                    ("Cache-Control", "no-cache"),
                    ("X-Content-Type-Options", "nosniff"),
                ],
                body: data)
        }
    }

    /// Like `response(for:)`, but answers a 404 refusal when there is no such file.
    public func respond(to request: HTTPRequest) -> HTTPResponse {
        response(for: request) ?? notFound(request.path)
    }

    /// The `Content-Type` for a file name, by extension (`application/octet-stream` when unknown).
    public static func contentType(forPath path: String) -> String {
        let name = path.split(separator: "/").last.map(String.init) ?? path
        guard let dot = name.lastIndex(of: ".") else { return "application/octet-stream" }
        switch name[name.index(after: dot)...].lowercased() {
        case "html", "htm": return "text/html; charset=utf-8"
        case "css": return "text/css; charset=utf-8"
        case "js", "mjs": return "text/javascript; charset=utf-8"
        case "json", "map": return "application/json"
        case "svg": return "image/svg+xml"
        case "png": return "image/png"
        case "ico": return "image/x-icon"
        case "txt": return "text/plain; charset=utf-8"
        case "woff2": return "font/woff2"
        default: return "application/octet-stream"
        }
    }

    private func notFound(_ path: String) -> HTTPResponse {
        refusals(HTTPRefusal(status: 404, code: .notFound, message: "no file at \(path)"))
    }

    private enum Resolution {
        case file(String)
        case missing
        case rejected
    }

    private func resolve(_ rawPath: String) -> Resolution {
        guard rawPath.hasPrefix("/"), let decoded = PercentDecoding.decode(rawPath, rejectNUL: true) else {
            return .rejected
        }
        let segments = decoded.split(separator: "/", omittingEmptySubsequences: true)
        if segments.contains(where: { $0.hasPrefix(".") || $0.contains("\\") }) {
            return .rejected
        }
        if let files {
            let key = segments.joined(separator: "/")
            if decoded.hasSuffix("/") || segments.isEmpty {
                let index = key.isEmpty ? indexFile : key + "/" + indexFile
                return files[index] != nil ? .file(index) : .missing
            }
            if files[key] != nil { return .file(key) }
            return files[key + "/" + indexFile] != nil ? .file(key + "/" + indexFile) : .missing
        }
        guard let realRoot = Self.realPath(root) else { return .missing }
        var candidate = realRoot
        for segment in segments { candidate += "/" + segment }
        if decoded.hasSuffix("/") || segments.isEmpty { candidate += "/" + indexFile }

        guard var real = Self.realPath(candidate) else { return .missing }
        guard real.hasPrefix(realRoot + "/") else { return .rejected }
        if Self.isDirectory(real) {
            guard let index = Self.realPath(real + "/" + indexFile), index.hasPrefix(realRoot + "/") else {
                return .missing
            }
            real = index
        }
        return Self.isRegularFile(real) ? .file(real) : .missing
    }

    private static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    private static func mode(_ path: String) -> mode_t? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return info.st_mode & S_IFMT
    }

    private static func isDirectory(_ path: String) -> Bool { mode(path) == S_IFDIR }

    private static func isRegularFile(_ path: String) -> Bool { mode(path) == S_IFREG }
}
