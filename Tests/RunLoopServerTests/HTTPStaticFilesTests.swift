@testable import MicroHTTP
import Foundation
import Testing

@testable import RunLoopServer

/// A temporary `site/Public` tree with one file of each served type, and a
/// secret `site/Package.swift` beside the root that must never be served.
private struct Site {
    let base: URL
    let root: URL

    init() throws {
        base = FileManager.default.temporaryDirectory.appendingPathComponent("http-static-\(UUID().uuidString)")
        root = base.appendingPathComponent("Public")
        let fm = FileManager.default
        try fm.createDirectory(at: root.appendingPathComponent("sub"), withIntermediateDirectories: true)
        let files: [String: String] = [
            "index.html": "<h1>home</h1>", "app.js": "console.log(1)", "style.css": "body{}",
            "data.json": "{}", "icon.svg": "<svg/>", "logo.png": "PNG", "favicon.ico": "ICO",
            "notes.txt": "notes", "font.woff2": "WOFF", "sub/index.html": "<p>sub</p>", ".hidden": "secret",
        ]
        for (name, text) in files {
            try Data(text.utf8).write(to: root.appendingPathComponent(name))
        }
        try Data("let secret = 1".utf8).write(to: base.appendingPathComponent("Package.swift"))
        try fm.createSymbolicLink(
            atPath: root.appendingPathComponent("escape.txt").path,
            withDestinationPath: base.appendingPathComponent("Package.swift").path)
    }

    func remove() { try? FileManager.default.removeItem(at: base) }
}

extension HTTPServerTests {
    @Test("static files: content types, index, HEAD, 405, 404 and traversal over real HTTP")
    func staticFilesOverHTTP() throws {
        let site = try Site()
        defer { site.remove() }
        let files = StaticFiles(root: site.root.path, refusals: APIResponses.refusal)
        let (server, base) = try startServer { request, respond in respond(files.respond(to: request)) }
        defer { server.stop() }

        let types: [(String, String)] = [
            ("/", "text/html"), ("/index.html", "text/html"), ("/app.js", "text/javascript"),
            ("/style.css", "text/css"), ("/data.json", "application/json"), ("/icon.svg", "image/svg+xml"),
            ("/logo.png", "image/png"), ("/favicon.ico", "image/x-icon"), ("/notes.txt", "text/plain"),
            ("/font.woff2", "font/woff2"), ("/sub/", "text/html"), ("/sub", "text/html"),
        ]
        for (path, type) in types {
            let result = try Curl.run(["\(base)\(path)"])
            #expect(result.status == 200, "\(path)")
            #expect(result.headers["content-type"]?.hasPrefix(type) == true, "\(path)")
            #expect(result.headers["cache-control"] == "no-cache", "\(path)")
        }
        #expect(try Curl.run(["\(base)/"]).text == "<h1>home</h1>")

        let head = try Curl.run(["-I", "\(base)/app.js"])
        #expect(head.status == 200)
        #expect(head.headers["content-length"] == "14")
        #expect(head.body.isEmpty)

        let post = try Curl.run(["-X", "POST", "\(base)/app.js"])
        #expect(post.status == 405)
        #expect(post.headers["allow"] == "GET, HEAD")
        #expect(post.headers["content-type"] == "application/json")

        let missing = try Curl.run(["\(base)/nope.html"])
        #expect(missing.status == 404)
        #expect(missing.text == #"{"error":{"code":"not_found","message":"no file at /nope.html","field":null}}"#)

        let attacks = [
            "/../Package.swift", "/%2e%2e/Package.swift", "/%2E%2E/Package.swift", "/sub/../../Package.swift",
            "/..%2fPackage.swift", "/%2e%2e%2fPackage.swift", "/index.html%00.png", "/.hidden", "/escape.txt",
            "//etc/passwd", "/%2fetc%2fpasswd", "/bad%zzescape",
        ]
        for path in attacks {
            let result = try Curl.run(["--path-as-is", "\(base)\(path)"])
            #expect(result.status == 404, "\(path)")
            #expect(!result.text.contains("secret"), "\(path)")
        }
    }

    @Test("static files: response(for:) is nil for missing files so a router can fall through")
    func staticFilesDirect() throws {
        let site = try Site()
        defer { site.remove() }
        let files = StaticFiles(root: site.root.path)
        #expect(files.response(for: HTTPRequest(method: "GET", path: "/api/threads")) == nil)
        #expect(files.response(for: HTTPRequest(method: "POST", path: "/api/threads")) == nil)
        #expect(files.response(for: HTTPRequest(method: "GET", path: "/../Package.swift"))?.status == 404)
        #expect(files.response(for: HTTPRequest(method: "GET", path: "/index.html"))?.status == 200)
        #expect(files.response(for: HTTPRequest(method: "DELETE", path: "/index.html"))?.status == 405)
        #expect(
            StaticFiles(root: site.base.appendingPathComponent("none").path).response(
                for: HTTPRequest(method: "GET", path: "/")) == nil)
        #expect(StaticFiles.contentType(forPath: "a/b/c.JS").hasPrefix("text/javascript"))
        #expect(StaticFiles.contentType(forPath: "noext") == "application/octet-stream")
    }
}
