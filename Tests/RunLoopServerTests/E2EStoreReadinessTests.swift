import Foundation
import GRDB
@testable import RunLoopStore
import RunLoopTestSupport
import Testing

/// A store that refuses this instance's configuration is visible (issue 40):
/// `/readyz` answers 503 saying why while `/healthz` stays 200 (the process
/// is alive and serves; it must only not take traffic unseen).
@Suite("E2E store readiness")
struct E2EStoreReadinessTests {
    @Test("a history file from a newer runloopd: /readyz 503 with the reason, /healthz 200, the file kept")
    func newerFileNotReady() async throws {
        try await withTemporaryPath("ready", folder: true) { dir in
            let path = dir.appendingPathComponent("history.sqlite").path
            try Self.newerFile(path)

            let server = try await ServerProcess.started(["--data-dir", dir.path])
            defer { server.stop() }
            let c = server.client
            #expect(try await c.get("/healthz").status == 200)
            let ready = try await c.get("/readyz")
            #expect(ready.status == 503, "\(ready)")
            #expect(ready.json["error"]["code"].string == "not_ready")
            let message = ready.json["error"]["message"].string ?? ""
            #expect(message.contains("refuses this configuration"), "\(message)")
            #expect(message.contains("newer runloopd"), "\(message)")
            #expect(try StoreUpgradeTests.migrations(path) == ["v1", "v2", "v3", "v4", "v5"])
            #expect(try StoreUpgradeTests.backups(dir).isEmpty)
        }
    }

    /// A file a newer runloopd migrated to a `v5` this one does not know.
    static func newerFile(_ path: String) throws {
        try StoreUpgradeTests.previousFile(path, version: SQLiteUpgrade.newest, events: 5)
        let queue = try DatabaseQueue.patient(path)
        try queue.write { try $0.execute(sql: "INSERT INTO grdb_migrations VALUES ('v5')") }
        try queue.close()
    }

    @Test("libpq's reasons: a certificate, TLS, a password, pg_hba are the configuration; no answer is not")
    func refusals() {
        let configuration = [
            "SSL error: certificate verify failed",
            "root certificate file \"/etc/ca.crt\" does not exist",
            "server does not support SSL, but SSL was required",
            "FATAL:  password authentication failed for user \"runloopd\"",
            "fe_sendauth: no password supplied",
            "FATAL:  no pg_hba.conf entry for host \"10.0.0.1\"",
            "FATAL:  database \"runloopd\" does not exist",
        ]
        for reason in configuration { #expect(PostgresStore.refusesConfiguration(reason), "\(reason)") }
        let transient = [
            "connection to server at \"127.0.0.1\", port 5432 failed: Connection refused",
            "could not translate host name \"postgres\" to address: Temporary failure in name resolution",
            "timeout expired",
            "SSL SYSCALL error: EOF detected",
            "FATAL:  the database system is starting up",
        ]
        for reason in transient { #expect(!PostgresStore.refusesConfiguration(reason), "\(reason)") }
    }
}
