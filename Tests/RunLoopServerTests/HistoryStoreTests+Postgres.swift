import CLibPQ
import Foundation
import GRDB
import RunLoopStore
import Testing

/// The PostgreSQL connection itself: TLS as the URL asks, and every wait bounded.
extension HistoryStoreTests {
    @Test(
        "PostgreSQL over TLS: sslmode=verify-full against the test server's certificate; an untrusted one is refused",
        .enabled(
            if: ProcessInfo.processInfo.environment["RUNLOOPD_TEST_POSTGRES_CA"] != nil,
            "needs the TLS certificate of scripts/with-postgres.sh"))
    func postgresTLS() throws {
        let ca = try #require(ProcessInfo.processInfo.environment["RUNLOOPD_TEST_POSTGRES_CA"])
        let base = try #require(PostgresTestDatabase.url)
        let database = try PostgresTestDatabase.create()
        defer { database.drop() }
        func with(_ tls: String) -> String {
            database.url.replacingOccurrences(of: "sslmode=disable", with: tls)
        }
        let store = try PostgresStore(url: with("sslmode=verify-full&sslrootcert=\(ca)"))
        try store.open()
        _ = try store.register(Self.instance("i1"))
        try store.write(StoreBatch(events: [Self.event(1)]))
        #expect(try store.events(HistoryQuery(limit: 10)).map(\.seq) == [1])
        // Both of the store's connections (the writer's, the readers') are encrypted.
        let name = try #require(URLComponents(string: database.url)?.path.dropFirst())
        let encrypted = try PostgresTestDatabase.admin(
            base,
            "SELECT count(*) FROM pg_stat_ssl JOIN pg_stat_activity USING (pid) WHERE ssl AND datname = '\(name)'")
        #expect(encrypted == "2")
        store.close()
        let untrusted = try PostgresStore(url: with("sslmode=verify-full&sslrootcert=/nonexistent/root.crt"))
        #expect(throws: StoreError.self) { try untrusted.open() }
    }

    @Test(
        "PostgreSQL that stops answering: a connect and a statement each give up at their timeout; the next call reconnects",
        .needsPostgres)
    func postgresTimeouts() throws {
        // A listener that never accepts: the TCP handshake completes, the server never speaks.
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { Glibc.close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, length) == 0 && listen(listener, 8) == 0 && getsockname(listener, $0, &length) == 0
            }
        }
        try #require(bound)
        let silent = try PostgresStore(
            url: "postgres://u@127.0.0.1:\(UInt16(bigEndian: address.sin_port))/db?sslmode=disable",
            connectTimeout: 0.3)
        // Without its timeout either call waits for good (the listener never
        // speaks, the lock is never released): a bound 60 times the timeout
        // tells the two apart on any machine, however busy.
        var started = Date()
        #expect(throws: StoreError.self) { try silent.open() }
        let connecting = Date().timeIntervalSince(started)
        #expect(connecting < 20, "the connect gave up after \(connecting) s")

        // A statement that waits on a lock held elsewhere gives up at the query timeout.
        let database = try PostgresTestDatabase.create()
        defer { database.drop() }
        let store = try PostgresStore(url: database.url, queryTimeout: 0.5)
        defer { store.close() }
        try store.open()
        _ = try store.register(Self.instance("i1"))
        let holder = try #require(PQconnectdb(database.url))
        defer { PQfinish(holder) }
        try #require(PQstatus(holder) == CONNECTION_OK)
        PQclear(PQexec(holder, "BEGIN"))
        let locked = PQexec(holder, "LOCK TABLE events IN ACCESS EXCLUSIVE MODE")
        try #require(PQresultStatus(locked) == PGRES_COMMAND_OK)
        PQclear(locked)
        started = Date()
        #expect(throws: StoreError.self) { try store.write(StoreBatch(events: [Self.event(1)])) }
        let waited = Date().timeIntervalSince(started)
        #expect(waited >= 0.5 && waited < 30, "the statement gave up after \(waited) s")
        PQclear(PQexec(holder, "ROLLBACK"))
        try store.write(StoreBatch(events: [Self.event(2)]))
        #expect(try store.events(HistoryQuery(limit: 10)).map(\.seq) == [2])
    }
}
