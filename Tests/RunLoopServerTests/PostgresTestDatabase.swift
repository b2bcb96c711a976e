import CLibPQ
import Foundation
import GRDB
import RunLoopStore
import Testing

/// A database of its own on the test PostgreSQL.
extension Trait where Self == ConditionTrait {
    /// Runs the test only when a PostgreSQL is there to run it on.
    static var needsPostgres: Self {
        .enabled(if: PostgresTestDatabase.url != nil, "needs RUNLOOPD_TEST_POSTGRES_URL (scripts/with-postgres.sh)")
    }
}

enum PostgresTestDatabase {
    static var url: String? { ProcessInfo.processInfo.environment["RUNLOOPD_TEST_POSTGRES_URL"] }

    /// Creates `rl_<random>`; returns its URL and how to drop it.
    static func create() throws -> (url: String, drop: () -> Void) {
        guard let base = url, var parts = URLComponents(string: base) else { throw StoreError("no test PostgreSQL") }
        let name = "rl_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(16)
        try admin(base, "CREATE DATABASE \(name)")
        parts.path = "/" + name
        let made = parts.string ?? base
        return (made, { _ = try? admin(base, "DROP DATABASE IF EXISTS \(name) WITH (FORCE)") })
    }

    /// Runs one statement on the base database (libpq, blocking; the URL is
    /// libpq's own form); returns the first value of its first row, if any.
    @discardableResult
    static func admin(_ base: String, _ sql: String) throws -> String? {
        guard let connection = PQconnectdb(base) else { throw StoreError("libpq: out of memory") }
        defer { PQfinish(connection) }
        guard PQstatus(connection) == CONNECTION_OK else {
            throw StoreError("cannot connect to \(base): \(String(cString: PQerrorMessage(connection)))")
        }
        guard let result = PQexec(connection, sql) else { throw StoreError("libpq: out of memory") }
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK else {
            throw StoreError("\(sql): \(String(cString: PQresultErrorMessage(result)))")
        }
        guard PQntuples(result) > 0, PQnfields(result) > 0, PQgetisnull(result, 0, 0) == 0 else { return nil }
        return String(cString: PQgetvalue(result, 0, 0))
    }
}
