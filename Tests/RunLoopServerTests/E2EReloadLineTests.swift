import Foundation
import RunLoopTestSupport
import Testing

/// SIGHUP's line says whether anything changed (issue 40): `SIGHUP: reloaded`
/// only when the token or the level did.
@Suite("E2E reload line")
struct E2EReloadLineTests {
    @Test("SIGHUP with the same token file: 'SIGHUP: nothing changed', never 'reloaded'; a new token: 'reloaded'")
    func nothingChanged() async throws {
        try await withTemporaryPath("token") { file in
            try Data("same-secret-0123456789\n".utf8).write(to: file)
            chmod(file.path, 0o600)
            let server = try await ServerProcess.started(["--token-file", file.path, "--no-store"])
            defer { server.stop() }
            server.send(signal: SIGHUP)
            #expect(
                await server.logged(timeout: 10) {
                    $0.contains("SIGHUP: nothing changed") && $0.contains("tokenRotated=false")
                },
                "\(server.log)")
            #expect(!server.log.contains("SIGHUP: reloaded"), "\(server.log)")
            #expect(try await server.rotateToken(to: "next-secret-0123456789", in: file), "\(server.log)")
            server.send(signal: SIGTERM)
            #expect(await server.exited(timeout: ServerProcess.startTimeout) == 0, "\(server.log)")
        }
    }
}
