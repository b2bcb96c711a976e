import Foundation
import RunLoopCore
import RunLoopServer
import MicroHTTP
import Testing
import RunLoopTestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// Issue 12 at start-up: a bind that would open the API to the network, and
/// token settings that contradict each other, are refused before serving.
extension E2ESecurityTests {

    @Test(
        "start-up: a non-loopback bind without a token refuses to start and says how to set one or --no-auth",
        arguments: [
            (["--host", "0.0.0.0"], [String: String]()), (["--host", "::"], [:]),
            ([], ["RUNLOOPD_HOST": "0.0.0.0"]), (["--host", "0.0.0.0", "--token", ""], [:]),
        ])
    func refusesOpenNetworkBind(arguments: [String], environment: [String: String]) async throws {
        let (status, log) = try await ServerProcess.runToExit(
            ["serve", "--port", "0"] + arguments, environment: environment)
        #expect(status == 1, "\(log)")
        for hint in ["RUNLOOPD_TOKEN", "--token-file", "--no-auth", "127.0.0.1"] {
            #expect(log.contains(hint), "\(hint): \(log)")
        }
        #expect(!log.contains("listening"))
    }

    @Test("start-up: contradictory or unreadable token settings are refused with a clear message")
    func tokenSettings() async throws {
        let cases: [([String], [String: String], String)] = [
            (["--token", "a", "--token-file", "/etc/hostname"], [:], "give the token once"),
            (["--no-auth", "--token", "a"], [:], "--no-auth contradicts"),
            (["--host", "0.0.0.0", "--token-file", "/nonexistent/token"], [:], "cannot read --token-file"),
            (["--allowed-host", "http://x"], [:], "--allowed-host 'http://x'"),
            (["--allowed-origin", "evil.example"], [:], "--allowed-origin 'evil.example'"),
            ([], ["RUNLOOPD_ALLOWED_ORIGIN": "null"], "--allowed-origin 'null'"),
            (["--token", "a"], [:], "shorter than 16 characters"),
            (["--token", "fifteen-chars15"], [:], "shorter than 16 characters"),
            ([], ["RUNLOOPD_TOKEN": "short"], "shorter than 16 characters"),
        ]
        for (arguments, environment, message) in cases {
            let (status, log) = try await ServerProcess.runToExit(
                ["serve", "--port", "0"] + arguments, environment: environment)
            #expect(status != 0 && status != nil, "\(arguments): \(log)")
            #expect(log.contains(message), "\(arguments): \(log)")
        }
        let empty = FileManager.default.temporaryDirectory.appendingPathComponent("empty-token-\(UUID().uuidString)")
        try Data(" \n".utf8).write(to: empty)
        defer { try? FileManager.default.removeItem(at: empty) }
        let (status, log) = try await ServerProcess.runToExit([
            "serve", "--port", "0", "--host", "0.0.0.0", "--token-file", empty.path,
        ])
        #expect(status == 1)
        #expect(log.contains("is empty"), "\(log)")
        // A token file with a short secret is refused too; 16 characters start.
        try Data("short-secret\n".utf8).write(to: empty)
        let (shortStatus, shortLog) = try await ServerProcess.runToExit([
            "serve", "--port", "0", "--host", "0.0.0.0", "--token-file", empty.path,
        ])
        #expect(shortStatus != 0 && shortStatus != nil, "\(shortLog)")
        #expect(shortLog.contains("shorter than 16 characters"), "\(shortLog)")
        try await ServerProcess.with(["--token", "sixteen-chars-16"]) { server in
            let probe = try await server.client.get("/healthz")
            #expect(probe.status == 200)
        }
    }

    @Test("start-up: --no-auth serves a non-loopback bind on purpose, with a loud warning")
    func noAuth() async throws {
        try await ServerProcess.with(["--host", "0.0.0.0", "--no-auth", "--read-only"]) { server in
            let list = try await server.client.get("/api/threads")
            #expect(list.status == 200)
            #expect(server.log.contains("WITHOUT A TOKEN (--no-auth)"))
        }
    }

    @Test("start-up: on 0.0.0.0 with --token-file (a mounted secret) it serves; probes by pod IP pass, names do not")
    func tokenFileOnWildcard() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("token-\(UUID().uuidString)")
        try Data("file-s3cret-0123456789\n".utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        for (arguments, environment) in [
            (["--host", "0.0.0.0", "--token-file", file.path], [String: String]()),
            (["--host", "0.0.0.0"], ["RUNLOOPD_TOKEN_FILE": file.path]),
        ] {
            let server = try await ServerProcess.started(arguments, environment: environment)
            defer { server.stop() }
            let c = server.client
            let probe = try await c.send("GET", "/healthz", headers: [("Host", "10.244.1.7:\(server.port)")])
            #expect(probe.status == 200, "\(probe)")
            let ready = try await c.send("GET", "/readyz", headers: [("Host", "[fd00::7]:\(server.port)")])
            #expect(ready.status == 200, "\(ready)")
            #expect(try await c.send("GET", "/healthz", headers: [("Host", "evil.example")]).status == 421)
            #expect(try await c.get("/api/threads").status == 401)
            let authorized = try await c.send(
                "GET", "/api/threads", headers: [("Authorization", "Bearer file-s3cret-0123456789")])
            #expect(authorized.status == 200, "\(authorized)")
            #expect(!server.log.contains("WITHOUT A TOKEN"))
        }
    }
}
