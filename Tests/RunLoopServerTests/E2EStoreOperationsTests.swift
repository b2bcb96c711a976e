import CLibPQ
import Foundation
import GRDB
import RunLoopServer
import RunLoopStore
import RunLoopTestSupport
import Testing

/// The real binary: `DELETE /api/fleet/{id}`, the file's mode, the scope shown.
@Suite("E2E store operations")
struct E2EStoreOperationsTests {
    /// Three other instances in the file: one stopped, one silent for an hour, one beating now.
    static func insertOthers(_ path: String, now: Double) throws {
        let db = try DatabaseQueue.patient(path)
        defer { try? db.close() }
        try db.write { db in
            for (id, beat, stopped) in [("gone", now - 60, now - 60), ("dead", now - 3_600, nil), ("alive", now, nil)] {
                try db.execute(
                    sql: """
                        INSERT INTO instances (id, url, version, host, pid, boot, started_at, heartbeat_at, stopped_at)
                        VALUES (?, 'http://x/', 't', 'h', 1, 1, ?, ?, ?)
                        """, arguments: [id, beat, beat, stopped])
            }
        }
    }

    @Test("DELETE /api/fleet/{id}: stopped and lost instances are forgotten; a live one is 409, an unknown one 404")
    func forgetInstances() async throws {
        let dir = try E2EHistoryTests.folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        // A minute's heartbeat: "alive" (beating as inserted) stays up for three
        // minutes, however slowly this machine runs the test.
        let server = try await ServerProcess.started(
            ["--data-dir", dir.path, "--instance-id", "me", "--heartbeat-interval", "60"])
        defer { server.stop() }
        let c = server.client
        let path = dir.appendingPathComponent("history.sqlite").path
        #expect(StoreOperationsTests.mode(path) == 0o600)
        let store = try await c.get("/api/store")
        #expect(store["retention", "scope"] == "instance")
        let now = Date().timeIntervalSince1970
        try Self.insertOthers(path, now: now)
        let fleet = try await c.get("/api/fleet")
        let health = Dictionary(
            uniqueKeysWithValues: fleet["instances"].items.map { ($0["id"].string ?? "", $0["health"].string ?? "") })
        #expect(health == ["me": "up", "gone": "stopped", "dead": "lost", "alive": "up"])

        let gone = try await c.delete("/api/fleet/gone")
        #expect(gone.status == 200)
        #expect(gone["health"] == "stopped")
        let dead = try await c.delete("/api/fleet/dead")
        #expect(dead.status == 200, "\(dead)")
        #expect(dead["health"] == "lost")
        let alive = try await c.delete("/api/fleet/alive")
        #expect(alive.status == 409)
        #expect(alive["error", "code"] == "instance_running")
        #expect(try await c.delete("/api/fleet/me").status == 409)
        let unknown = try await c.delete("/api/fleet/gone")
        #expect(unknown.status == 404)
        #expect(unknown["error", "code"] == "not_found")
        let after = try await c.get("/api/fleet")
        #expect(Set(after["instances"].items.compactMap { $0["id"].string }) == ["me", "alive"])
    }
}

extension E2EStoreOperationsTests {
    @Test("the new store flags are checked at start: an unknown scope, an unreadable or doubled password (exit 64)")
    func flags() async throws {
        let pg = "postgres://u@127.0.0.1:1/db"
        for (arguments, says) in [
            (["--retention-scope", "everyone"], "'everyone' is invalid for '--retention-scope"),
            (["--store-writer-nice", "20"], "--store-writer-nice must be 0...19"),
            (["--store-writer-nice=-1"], "--store-writer-nice"),
            (["--store", pg, "--store-password-file", "/nonexistent/pw"], "cannot read /nonexistent/pw"),
            (["--store-password-file", "/etc/hostname"], "for a PostgreSQL store"),
            (["--store", "postgres://u:x@127.0.0.1:1/db", "--store-password-file", "/etc/hostname"], "one place"),
        ] {
            let (status, output) = try await ServerProcess.runToExit(["--port", "0"] + arguments)
            #expect(status == 64, "\(arguments): \(output)")
            #expect(output.contains(says), "\(arguments): \(output)")
        }
    }

    /// The nice value of `pid`'s thread named `name` (nil: its main thread;
    /// nil when it has no such thread).
    static func nice(pid: Int32, thread name: String?) -> Int? {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        for tid in tasks {
            let comm = try? String(contentsOfFile: "/proc/\(pid)/task/\(tid)/comm", encoding: .utf8)
            guard name.map({ comm?.trimmingCharacters(in: .whitespacesAndNewlines) == $0 }) ?? (tid == "\(pid)"),
                let stat = try? String(contentsOfFile: "/proc/\(pid)/task/\(tid)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { continue }
            // After the name: state ppid … priority nice (fields 3 to 19).
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            return fields.count > 16 ? Int(fields[16]) : nil
        }
        return nil
    }

    @Test("the store's writer runs at the process's priority, or --store-writer-nice below it")
    func writerNice() async throws {
        for (arguments, above) in [([String](), 0), (["--store-writer-nice", "3"], 3)] {
            let dir = try E2EHistoryTests.folder()
            defer { try? FileManager.default.removeItem(at: dir) }
            let server = try await ServerProcess.started(["--data-dir", dir.path] + arguments)
            defer { server.stop() }
            // The writer names itself once it runs: wait for the name.
            waitUntil(timeout: 10) { Self.nice(pid: server.pid, thread: "rl-store") != nil }
            let base = Self.nice(pid: server.pid, thread: nil)
            let writer = Self.nice(pid: server.pid, thread: "rl-store")
            #expect(base != nil && writer != nil, "\(arguments): the main thread and rl-store")
            if let base, let writer { #expect(writer == min(base + above, 19), "\(arguments)") }
        }
    }
}

extension E2EStoreOperationsTests {
    /// Events of another instance id in the file (synchronous GRDB), as a
    /// second writer: it waits while the server's writer holds the file.
    static func insertEvents(_ path: String, instance: String, count: Int) throws {
        let db = try DatabaseQueue.patient(path, seconds: 10)
        defer { try? db.close() }
        try db.write { db in
            for seq in 1...count {
                try db.execute(
                    sql:
                        "INSERT INTO events (instance, boot, seq, at, type, thread, data) VALUES (?, 1, ?, ?, 'perform', NULL, ?)",
                    arguments: [instance, seq, Date().timeIntervalSince1970, StoreOperationsTests.padding])
            }
        }
    }

    @Test("the binary's retention (scope instance) prunes its own events only, logs the prune at warning")
    func retentionThroughTheBinary() async throws {
        let dir = try E2EHistoryTests.folder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let server = try await ServerProcess.started(
            ["--data-dir", dir.path, "--instance-id", "me", "--retention-size", "1MB"])
        defer { server.stop() }
        let c = server.client
        let path = dir.appendingPathComponent("history.sqlite").path
        try Self.insertEvents(path, instance: "other", count: 50)
        let thread = try await c.createThread(["run": ["style": "loop"]])
        let pad = String(repeating: "y", count: 2_000)
        var pruned = 0.0
        let deadline = Date().addingTimeInterval(30 * ServerProcess.slowdown)
        while pruned == 0, Date() < deadline {
            for _ in 0..<20 {
                _ = try await c.post(
                    "/api/threads/\(thread)/perform",
                    ["selector": "echo", "args": ["pad": .string(pad)], "waitUntilDone": true])
            }
            pruned = try await c.get("/api/store")["pruned"].number ?? 0
        }
        #expect(pruned > 0)
        #expect(
            try E2EHistoryTests.sqlite(path, "SELECT COUNT(*) FROM events WHERE instance = 'other'", as: Int.self) == 50
        )
        let written = try await c.get("/api/store")["written"].number ?? 0
        let events = "SELECT \(E2EHistoryTests.eventsInRows) FROM events WHERE instance = 'me'"
        let mine = try E2EHistoryTests.sqlite(path, events, as: Int.self)
        #expect(Double(mine ?? 0) < written)
        // The line follows the count (written after the status changed).
        let wait = 10 * ServerProcess.slowdown
        _ = await offThePool { server.output.wait(timeout: wait) { $0.log.contains("history pruned") } }
        let line = server.log.split(separator: "\n").first { $0.contains("history pruned") }
        #expect(line?.contains("warning") == true, "\(line ?? "no prune line")")
        #expect(line?.contains("scope=instance") == true)
    }
}

extension E2EStoreOperationsTests {
    /// Seconds since 1970 of an API timestamp (`2026-11-26T04:36:01.493Z`).
    static func seconds(_ text: String) -> Double? {
        Timestamp.parse(text)?.timeIntervalSince1970
    }

    @Test(
        "fleet health through a PostgreSQL outage: the other instance is never lost while it backs off; killed, it is",
        .enabled(
            if: ProcessInfo.processInfo.environment["RUNLOOPD_TEST_POSTGRES_FLEET_URL"] != nil,
            "needs the fleet cluster of scripts/with-postgres.sh"))
    func noFlapAfterOutage() async throws {
        let environment = ProcessInfo.processInfo.environment
        let url = try #require(environment["RUNLOOPD_TEST_POSTGRES_FLEET_URL"])
        let control = try #require(environment["RUNLOOPD_TEST_POSTGRES_FLEET_PG_CTL"])
        let beat = ["--heartbeat-interval", "0.5", "--log-level", "warning"]
        let a = try await ServerProcess.started(["--store", url, "--instance-id", "fa"] + beat)
        defer { a.stop() }
        let b = try await ServerProcess.started(["--store", url, "--instance-id", "fb"] + beat)
        defer { b.stop() }
        @Sendable func health(_ r: TestHTTPResponse) -> String? {
            r["instances"].items.first { $0["id"] == "fb" }?["health"].string
        }
        _ = try await a.client.poll("/api/fleet") { health($0) == "up" }

        try await E2EHistoryTests.pgctl(control, "stop -m fast")
        // Both writers see it fail, then the outage lasts 4 s (their back-off grows to 2-4 s).
        _ = try await a.client.poll("/api/store") { $0["up"] == false }
        _ = try await b.client.poll("/api/store") { $0["up"] == false }
        let outageEnds = Date().addingTimeInterval(4)
        _ = try await a.client.poll("/api/store", timeout: 10) { _ in Date() >= outageEnds }
        try await E2EHistoryTests.pgctl(control, "start")
        let restarted = Date().timeIntervalSince1970

        // Until b has beaten again, a's every answer shows b up (or fails: a's own store not back yet).
        let healths = Monitor<[String]>([])
        _ = try await a.client.poll("/api/fleet", timeout: 30) { r in
            guard r.status == 200, let h = health(r) else { return false }
            healths.update { $0.append(h) }
            let beatAt = r["instances"].items.first { $0["id"] == "fb" }?["heartbeatAt"].string ?? ""
            return (Self.seconds(beatAt) ?? 0) > restarted
        }
        let seen = healths.value
        #expect(!seen.isEmpty)
        let lost = seen.filter { $0 == "lost" }.count
        #expect(lost == 0, "\(lost) of \(seen.count) answers say lost")

        // Killed, it is lost after three intervals.
        b.send(signal: SIGKILL)
        do {
            _ = try await a.client.poll("/api/fleet", timeout: 15) { health($0) == "lost" }
        } catch {
            // What a's writer was doing: its log and its store status.
            let store = try? await a.client.get("/api/store")
            print("fleet test: a's log:\n\(a.log)\nfleet test: a's /api/store: \(store.map { "\($0)" } ?? "none")")
            throw error
        }
    }
}
