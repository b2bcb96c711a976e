import CLibPQ
import Foundation
import Primitives

/// One libpq connection (`PGconn`), used the way the store is called: one
/// blocking call at a time, by whichever thread holds it (a `PQSlot` lends it
/// to one caller at a time; libpq connections must not be shared between
/// threads). The socket is non-blocking and every wait is a `poll` with a
/// deadline, so no call outlasts its timeout: connecting, sending (a large
/// batch fills the socket), waiting for the answer. A caller that gets an
/// error drops the connection (`finish`) and connects again next time.
///
/// Statements are parameterised: values travel in binary (int8, float8, text:
/// no number formatting, nothing to escape); a statement whose text recurs is
/// prepared once per connection and kept.
// @unchecked: the PGconn is used by one caller at a time (PQSlot lends it).
final class PQConnection: @unchecked Sendable {
    /// What went wrong, as libpq or the server said it (one line).
    struct Failure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    private var raw: OpaquePointer?
    /// Prepared statements: text and parameter types → name.
    private var prepared: [String: String] = [:]

    /// Connects with libpq's keyword/value `parameters`, giving up after `timeout` seconds.
    init(parameters: [(String, String)], timeout: Double) throws {
        LockCheck.assertNoneHeld("a PostgreSQL connect")
        let deadline = Self.now() + timeout
        let made = Self.withCStrings(parameters.map(\.0)) { keywords in
            Self.withCStrings(parameters.map(\.1)) { values in PQconnectStartParams(keywords, values, 0) }
        }
        guard let made else { throw Failure("libpq could not allocate a connection") }
        raw = made
        if PQstatus(made) == CONNECTION_BAD { throw failure(finishing: true) }
        var polling = PGRES_POLLING_WRITING
        while polling != PGRES_POLLING_OK {
            switch polling {
            case PGRES_POLLING_FAILED: throw failure(finishing: true)
            case PGRES_POLLING_READING: try wait(for: Int16(POLLIN), until: deadline, timeout: timeout, closing: true)
            default: try wait(for: Int16(POLLOUT), until: deadline, timeout: timeout, closing: true)
            }
            polling = PQconnectPoll(made)
        }
        guard PQsetnonblocking(made, 1) == 0 else { throw failure(finishing: true) }
        // Notices (`CREATE … IF NOT EXISTS` sends some) are dropped: libpq would print them to standard error.
        PQsetNoticeProcessor(made, { _, _ in }, nil)
    }

    deinit { finish() }

    /// Closes the connection (idempotent).
    func finish() {
        guard let open = raw else { return }
        LockCheck.assertNoneHeld("a PostgreSQL close")
        raw = nil
        PQfinish(open)
    }

    /// Runs one statement and returns its rows (each value as `SQLValue`, by
    /// its column's type). `prepare`: the text recurs, prepare it once.
    func execute(_ text: String, _ values: [SQLValue], prepare: Bool, timeout: Double) throws -> [[SQLValue]] {
        LockCheck.assertNoneHeld("a PostgreSQL statement")
        guard let conn = raw else { throw Failure("the connection is closed") }
        let deadline = Self.now() + timeout
        let binds = Binds(values)
        if prepare {
            let key = binds.typeKey + text
            let name: String
            if let known = prepared[key] {
                name = known
            } else {
                name = "rl\(prepared.count + 1)"
                guard PQsendPrepare(conn, name, text, Int32(binds.types.count), binds.types) == 1 else {
                    throw failure()
                }
                try flush(until: deadline, timeout: timeout)
                _ = try results(until: deadline, timeout: timeout)
                prepared[key] = name
            }
            let sent = binds.withPointers { count, pointers, lengths, formats in
                PQsendQueryPrepared(conn, name, count, pointers, lengths, formats, 0)
            }
            guard sent == 1 else { throw failure() }
        } else {
            let sent = binds.withPointers { count, pointers, lengths, formats in
                PQsendQueryParams(conn, text, count, binds.types, pointers, lengths, formats, 0)
            }
            guard sent == 1 else { throw failure() }
        }
        try flush(until: deadline, timeout: timeout)
        return try results(until: deadline, timeout: timeout)
    }

    /// Runs a `COPY … FROM STDIN` statement; `produce` hands its data (in the
    /// format the statement names) to `send` piece by piece.
    func copy(_ statement: String, timeout: Double, _ produce: (_ send: ([UInt8]) throws -> Void) throws -> Void)
        throws
    {
        LockCheck.assertNoneHeld("a PostgreSQL copy")
        guard let conn = raw else { throw Failure("the connection is closed") }
        let deadline = Self.now() + timeout
        guard PQsendQueryParams(conn, statement, 0, nil, nil, nil, nil, 0) == 1 else { throw failure() }
        try flush(until: deadline, timeout: timeout)
        try readable(until: deadline, timeout: timeout)
        guard let started = PQgetResult(conn) else { throw Failure("no answer to COPY") }
        let status = PQresultStatus(started)
        let message = status == PGRES_COPY_IN ? nil : Self.message(started)
        PQclear(started)
        if let message {
            _ = try? results(until: deadline, timeout: timeout)
            throw Failure(message)
        }
        try produce { data in
            var queued: Int32 = 0
            while queued == 0 {
                queued = data.withUnsafeBufferPointer { bytes in
                    bytes.withMemoryRebound(to: CChar.self) { PQputCopyData(conn, $0.baseAddress, Int32($0.count)) }
                }
                if queued < 0 { throw failure() }
                // libpq's buffer is full: wait until the socket takes some.
                if queued == 0 { try flush(until: deadline, timeout: timeout, waitFirst: true) }
            }
        }
        var ended: Int32 = 0
        while ended == 0 {
            ended = PQputCopyEnd(conn, nil)
            if ended < 0 { throw failure() }
            if ended == 0 { try flush(until: deadline, timeout: timeout, waitFirst: true) }
        }
        try flush(until: deadline, timeout: timeout)
        _ = try results(until: deadline, timeout: timeout)
    }

    /// Sends what libpq holds for the socket (waiting for it to drain, and
    /// reading what arrives meanwhile so the server never blocks on us).
    private func flush(until deadline: Double, timeout: Double, waitFirst: Bool = false) throws {
        guard let conn = raw else { throw Failure("the connection is closed") }
        var wait = waitFirst
        while true {
            if wait {
                let events = try self.wait(for: Int16(POLLIN | POLLOUT), until: deadline, timeout: timeout)
                if events & Int16(POLLIN) != 0, PQconsumeInput(conn) == 0 { throw failure() }
            }
            let left = PQflush(conn)
            if left == 0 { return }
            if left < 0 { throw failure() }
            wait = true
        }
    }

    /// Reads until libpq has a whole result to give.
    private func readable(until deadline: Double, timeout: Double) throws {
        guard let conn = raw else { throw Failure("the connection is closed") }
        while PQisBusy(conn) != 0 {
            try wait(for: Int16(POLLIN), until: deadline, timeout: timeout)
            if PQconsumeInput(conn) == 0 { throw failure() }
        }
    }

    /// Every result of the statement sent: the rows of the last one that has
    /// rows; the first error, once all have arrived (the connection is then
    /// ready for the next statement).
    private func results(until deadline: Double, timeout: Double) throws -> [[SQLValue]] {
        guard let conn = raw else { throw Failure("the connection is closed") }
        var rows: [[SQLValue]] = []
        var error: String?
        while true {
            try readable(until: deadline, timeout: timeout)
            guard let result = PQgetResult(conn) else { break }
            defer { PQclear(result) }
            let status = PQresultStatus(result)
            if status == PGRES_TUPLES_OK {
                rows = Self.rows(result)
            } else if status != PGRES_COMMAND_OK && status != PGRES_EMPTY_QUERY {
                error = error ?? Self.message(result)
                // A COPY the caller did not expect: end it so the results end.
                if status == PGRES_COPY_IN { _ = PQputCopyEnd(conn, "unexpected COPY") }
            }
        }
        if let error { throw Failure(error) }
        return rows
    }

    /// Waits until the socket is ready for `events`; throws past the deadline.
    @discardableResult
    private func wait(for events: Int16, until deadline: Double, timeout: Double, closing: Bool = false) throws
        -> Int16
    {
        guard let conn = raw else { throw Failure("the connection is closed") }
        while true {
            let left = deadline - Self.now()
            if left <= 0 {
                if closing { finish() }
                throw Failure("no answer in \(timeout) s")
            }
            var descriptor = pollfd(fd: PQsocket(conn), events: events, revents: 0)
            if descriptor.fd < 0 { throw failure(finishing: closing) }
            let ready = poll(&descriptor, 1, Int32(min((left * 1000).rounded(.up), 60_000)))
            if ready > 0 { return descriptor.revents }
            if ready < 0 && errno != EINTR {
                let reason = String(cString: strerror(errno))
                if closing { finish() }
                throw Failure("poll: \(reason)")
            }
        }
    }

    /// The connection's last error as one line (and, when `finishing`, the connection closed).
    private func failure(finishing: Bool = false) -> Failure {
        let text = raw.flatMap { PQerrorMessage($0) }.map { String(cString: $0) } ?? "the connection is closed"
        if finishing { finish() }
        return Failure(Self.oneLine(text))
    }

    /// A result's error: the server's primary message, else libpq's text.
    private static func message(_ result: OpaquePointer) -> String {
        if let primary = PQresultErrorField(result, runloopd_pq_diag_message_primary) {
            return String(cString: primary)
        }
        if let text = PQresultErrorMessage(result), text.pointee != 0 { return oneLine(String(cString: text)) }
        return String(cString: PQresStatus(PQresultStatus(result)))
    }

    /// libpq's messages end in a newline and may hold several lines (each host tried).
    private static func oneLine(_ text: String) -> String {
        text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
            .joined(separator: "; ")
    }

    /// A result's rows, each value decoded from text by its column's type.
    private static func rows(_ result: OpaquePointer) -> [[SQLValue]] {
        let count = Int(PQntuples(result))
        let columns = Int(PQnfields(result))
        let kinds = (0..<columns).map { column -> Int in
            switch PQftype(result, Int32(column)) {
            case runloopd_pq_int2_oid, runloopd_pq_int4_oid, runloopd_pq_int8_oid: 1
            case runloopd_pq_float4_oid, runloopd_pq_float8_oid, runloopd_pq_numeric_oid: 2
            default: 0
            }
        }
        var rows: [[SQLValue]] = []
        rows.reserveCapacity(count)
        for row in 0..<Int32(count) {
            var values: [SQLValue] = []
            values.reserveCapacity(columns)
            for column in 0..<columns {
                let c = Int32(column)
                if PQgetisnull(result, row, c) != 0 {
                    values.append(.null)
                    continue
                }
                guard let text = PQgetvalue(result, row, c) else {
                    values.append(.null)
                    continue
                }
                switch kinds[column] {
                case 1: values.append(.int(Int64(strtoll(text, nil, 10))))
                case 2: values.append(.double(strtod(text, nil)))
                default:
                    let length = Int(PQgetlength(result, row, c))
                    values.append(
                        .text(String(decoding: UnsafeRawBufferPointer(start: text, count: length), as: UTF8.self)))
                }
            }
            rows.append(values)
        }
        return rows
    }

    /// Monotonic seconds.
    static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// `strings` as a NULL-terminated array of C strings, for the duration of `body`.
    static func withCStrings<R>(_ strings: [String], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
        let copies = strings.map { strdup($0) }
        defer { copies.forEach { free($0) } }
        return body(copies.map { UnsafePointer($0) } + [nil])
    }
}

/// Parameters in libpq's binary format: int8 and float8 big-endian, text as
/// its UTF-8 bytes, NULL as no value (its type left for the server to infer).
struct Binds {
    private var bytes: [UInt8] = []
    private var offsets: [Int] = []
    private var lengths: [Int32] = []
    private(set) var types: [Oid] = []

    init(_ values: [SQLValue]) {
        offsets.reserveCapacity(values.count)
        lengths.reserveCapacity(values.count)
        types.reserveCapacity(values.count)
        for value in values { append(value) }
        // libpq wants a pointer even for an empty value; keep one byte past the end.
        bytes.append(0)
    }

    /// Appends one value.
    mutating func append(_ value: SQLValue) {
        switch value {
        case .int(let v):
            add(runloopd_pq_int8_oid, UInt64(bitPattern: v))
        case .double(let v):
            add(runloopd_pq_float8_oid, v.bitPattern)
        case .text(let v):
            offsets.append(bytes.count)
            var text = v
            text.withUTF8 { bytes.append(contentsOf: $0) }
            lengths.append(Int32(bytes.count - offsets[offsets.count - 1]))
            types.append(runloopd_pq_text_oid)
        case .null:
            offsets.append(-1)
            lengths.append(0)
            types.append(0)
        }
    }

    private mutating func add(_ type: Oid, _ bits: UInt64) {
        offsets.append(bytes.count)
        withUnsafeBytes(of: bits.bigEndian) { bytes.append(contentsOf: $0) }
        lengths.append(8)
        types.append(type)
    }

    /// The parameter types as a key for prepared statements (a NULL leaves
    /// its type to the server, so each pattern of NULLs is its own statement).
    var typeKey: String { types.map { String($0) }.joined(separator: ",") + ";" }

    /// The count, value pointers, lengths and formats libpq takes.
    func withPointers<R>(
        _ body: (Int32, [UnsafePointer<CChar>?], [Int32], [Int32]) -> R
    ) -> R {
        bytes.withUnsafeBufferPointer { buffer in
            let base = UnsafeRawPointer(buffer.baseAddress!)
            let pointers = offsets.map { $0 < 0 ? nil : (base + $0).assumingMemoryBound(to: CChar.self) }
            return body(Int32(offsets.count), pointers, lengths, [Int32](repeating: 1, count: offsets.count))
        }
    }
}
