import Foundation
import RunLoopCore
import RunLoopTestSupport
import Testing

@testable import RunLoopServer

/// One binary serves everything (issue 39): the dashboard (`Public/`) and the
/// experiments (`experiments/`) are compiled in, so `runloopd` copied alone into
/// an empty folder and started there serves `/`, every dashboard file byte for
/// byte, and lists every experiment; `--public-dir` and `--experiments-dir`
/// only override, and the start-up log says what is served from where.
@Suite("E2E one binary: the dashboard and the experiments compiled in")
struct E2EOneBinaryTests {
    /// The built binary copied alone into a fresh empty folder.
    static func lonelyCopy() throws -> (folder: URL, binary: URL) {
        let built = try #require(E2EPaths.binary, "no runloopd binary: run swift build first")
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "runloopd-alone-\(getpid())-\(UInt64.random(in: 0..<UInt64.max))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let binary = folder.appendingPathComponent("runloopd")
        // Copied by cp, not in this process: a test on another thread that
        // spawns a process meanwhile would inherit the copy's open write
        // descriptor, and exec of the copy then fails with ETXTBSY ("Text
        // file busy", once in CI) until that child has exec'd.
        let cp = Process()
        cp.executableURL = URL(fileURLWithPath: "/bin/cp")
        cp.arguments = [built.resolvingSymlinksInPath().path, binary.path]
        try cp.run()
        cp.waitUntilExit()
        try #require(cp.terminationStatus == 0, "cp exited \(cp.terminationStatus)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path) == ["runloopd"])
        return (folder, binary)
    }

    /// Every regular file under `root`, by its path relative to it (hidden names left out).
    static func files(under root: URL) -> [String] {
        let names = FileManager.default.enumerator(atPath: root.path)?.compactMap { $0 as? String } ?? []
        return names.filter { name in
            var isDirectory: ObjCBool = false
            let exists = FileManager.default.fileExists(
                atPath: root.appendingPathComponent(name).path, isDirectory: &isDirectory)
            return exists && !isDirectory.boolValue && !name.split(separator: "/").contains { $0.hasPrefix(".") }
        }.sorted()
    }

    @Test("copied alone into an empty folder, it serves / and every dashboard file and lists every experiment")
    func aloneInAnEmptyFolder() async throws {
        let (folder, binary) = try Self.lonelyCopy()
        defer { try? FileManager.default.removeItem(at: folder) }
        let server = try await offThePool {
            try ServerProcess.runloopd(binary: binary, arguments: ["--no-store"], workingDirectory: folder)
        }
        defer { server.stop() }
        let c = server.client

        let publicRoot = E2EPaths.packageRoot.appendingPathComponent("Public")
        let index = try await c.get("/")
        #expect(index.status == 200)
        #expect(index.header("Content-Type")?.hasPrefix("text/html") == true)
        #expect(index.body == [UInt8](try Data(contentsOf: publicRoot.appendingPathComponent("index.html"))))
        let dashboard = Self.files(under: publicRoot)
        #expect(dashboard.count >= 10)
        for name in dashboard {
            let answer = try await c.get("/" + name)
            #expect(answer.status == 200, "GET /\(name)")
            #expect(answer.body == [UInt8](try Data(contentsOf: publicRoot.appendingPathComponent(name))), "/\(name)")
        }
        #expect(try await c.get("/no-such-file.js").status == 404)
        #expect(try await c.get("/%2e%2e/Package.swift").status == 404)

        let experimentFiles = Self.files(under: E2EPaths.packageRoot.appendingPathComponent("experiments"))
            .filter { $0.hasSuffix(".json") && !$0.contains("/") }
        let list = try await c.get("/api/experiments")
        #expect(list.status == 200)
        let ids = Set(list["experiments"].items.compactMap { $0["id"].string })
        #expect(ids.count == experimentFiles.count)
        #expect(ids == Set(experimentFiles.map { String($0.dropLast(".json".count)) }))
        let first = try #require(ids.sorted().first)
        #expect(try await c.get("/api/experiments/\(first)").status == 200)

        #expect(server.log.contains("serving the dashboard and the experiments"))
        #expect(server.log.contains("compiled in (\(dashboard.count) files)"), "\(server.log)")
        #expect(server.log.contains("\(experimentFiles.count) experiments compiled in"))
        // The working folder stayed empty but for the copy (the store is off).
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path) == ["runloopd"])
    }

    @Test("--public-dir and --experiments-dir override what is compiled in, and the log names the folders")
    func foldersOverride() async throws {
        let (folder, binary) = try Self.lonelyCopy()
        defer { try? FileManager.default.removeItem(at: folder) }
        let site = folder.appendingPathComponent("site")
        let lab = folder.appendingPathComponent("lab")
        try FileManager.default.createDirectory(at: site, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: lab, withIntermediateDirectories: true)
        try Data("<p>my own dashboard</p>\n".utf8).write(to: site.appendingPathComponent("index.html"))
        let source = E2EPaths.packageRoot.appendingPathComponent("experiments/testdemo1-empty-mode.json")
        try FileManager.default.copyItem(at: source, to: lab.appendingPathComponent("only.json"))
        let server = try await offThePool {
            try ServerProcess.runloopd(
                binary: binary, arguments: ["--no-store", "--public-dir", "site", "--experiments-dir", lab.path],
                workingDirectory: folder)
        }
        defer { server.stop() }
        let c = server.client
        let index = try await c.get("/")
        #expect(String(decoding: index.body, as: UTF8.self) == "<p>my own dashboard</p>\n")
        #expect(try await c.get("/js/main.js").status == 404)
        let ids = try await c.get("/api/experiments")["experiments"].items.compactMap { $0["id"].string }
        #expect(ids == ["testdemo1-empty-mode"])
        let realSite = site.resolvingSymlinksInPath().path
        #expect(server.log.contains(realSite) || server.log.contains(site.path), "\(server.log)")
        #expect(server.log.contains("1 experiment from \(lab.path)"), "\(server.log)")
    }
}
