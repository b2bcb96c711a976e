/// What both stores do with the same SQL, given how to run a statement.
/// `execute` runs one inside the caller's transaction and returns the rows;
/// its flag says whether the text recurs, so that a store may prepare it once
/// and keep it (a multi-row insert's text changes with its row count: kept,
/// there would be one per count).
struct HistoryLogic {
    let sql: HistorySQL
    let execute: (_ text: String, _ values: [SQLValue], _ recurs: Bool) throws -> [[SQLValue]]
    /// How a store writes many events at once (SQLite: multi-row INSERTs
    /// into the newest segment; PostgreSQL: COPY); only `write` needs it.
    var insertEvents: ((ArraySlice<StoredEvent>) throws -> Void)? = nil

    /// Runs a statement whose text recurs.
    func run(_ text: String, _ values: [SQLValue]) throws -> [[SQLValue]] {
        try execute(text, values, true)
    }

    /// Most rows in one piece of PostgreSQL's COPY.
    static let rowsPerInsert = 500

    func write(_ batch: StoreBatch) throws {
        if !batch.events.isEmpty {
            guard let insertEvents else { throw StoreError("this store's logic has no way to insert events") }
            try insertEvents(batch.events[...])
        }
        for thread in batch.threads { _ = try run(sql.upsertThread, HistorySQL.threadValues(thread)) }
        if let beat = batch.heartbeat {
            _ = try run(sql.heartbeat, [.double(beat.at), .int(beat.seqCeiling), .text(beat.instance)])
        }
    }

    func register(_ instance: InstanceRecord) throws -> Registration {
        let row = try run(sql.selectInstance, [.text(instance.id)]).first
        let previous = row.map(InstanceRecord.init(row:))
        let ceiling = row?[9].int ?? 0
        let maxSeq = try run(sql.maxSeq, [.text(instance.id)]).first?.first?.int ?? 0
        let boot = (previous?.boot ?? 0) + 1
        let firstSeq = max(ceiling, maxSeq) + 1
        var lost: [StoredThread] = []
        for row in try run(sql.openThreads, [.text(instance.id), .int(boot)]) {
            var thread = StoredThread(row: row)
            // It ended when its process was last heard of.
            let endedAt = previous?.heartbeatAt ?? instance.startedAt
            _ = try run(
                sql.markLost, [.double(endedAt), .text(thread.instance), .int(thread.boot), .text(thread.thread)])
            thread.endedAt = endedAt
            thread.endedHow = "lost"
            lost.append(thread)
        }
        var record = instance
        record.boot = boot
        record.stoppedAt = nil
        _ = try run(sql.upsertInstance, HistorySQL.instanceValues(record, seqCeiling: firstSeq - 1))
        return Registration(boot: boot, firstSeq: firstSeq, lostThreads: lost, previous: previous)
    }

    func markStopped(instance: String, at: Double) throws {
        _ = try run(sql.markStopped, [.double(at), .double(at), .text(instance)])
    }

    /// The events of at most `query.limit` rows: a row that keeps a perform
    /// and its request gives both (each if its type is asked for; the newer
    /// first when newest first), with the row's id; a packed row gives each
    /// of its pairs that the query's bounds admit (by the pair's id and its
    /// perform's time and seq), each pair with its own id. A packed row that
    /// the widened bounds found but whose pairs all fall outside the others
    /// does not count: more rows are read instead.
    func events(_ query: HistoryQuery) throws -> [StoredEvent] {
        var limit = query.limit
        while true {
            var read = query
            read.limit = limit
            let (text, values) = sql.events(read)
            let rows = try run(text, values)
            var events: [StoredEvent] = []
            var empty = 0
            for row in rows {
                let event = StoredEvent(row: row)
                guard event.request != nil else {
                    events.append(event)
                    continue
                }
                let kept = Self.admitted(event.unfolded, by: query)
                if kept.isEmpty { empty += 1 }
                // Oldest first by id or by seq; else newest first.
                events.append(contentsOf: query.ascending || query.afterSeq != nil ? kept : kept.reversed())
            }
            if empty == 0 || rows.count < limit || rows.count - empty >= query.limit { return events }
            limit = query.limit + empty
        }
    }

    /// A row's pairs (perform, request) within the query's bounds, by the
    /// pair's id and its perform's time and seq; then its types.
    static func admitted(_ events: [StoredEvent], by q: HistoryQuery) -> [StoredEvent] {
        var kept: [StoredEvent] = []
        var start = events.startIndex
        while start < events.endIndex {
            let perform = events[start]
            var end = start + 1
            while end < events.endIndex, events[end].id == perform.id { end += 1 }
            defer { start = end }
            if let since = q.since, perform.at < since { continue }
            if let until = q.until, perform.at >= until { continue }
            if let cursor = q.cursor, q.ascending ? perform.id <= cursor : perform.id >= cursor { continue }
            if let after = q.afterSeq, perform.seq <= after { continue }
            kept += events[start..<end].filter { q.types.isEmpty || q.types.contains($0.type) }
        }
        return kept
    }

    func threads(instance: String?, boot: Int64?, limit: Int) throws -> [StoredThread] {
        let (text, values) = sql.threads(instance: instance, boot: boot, limit: limit)
        return try run(text, values).map(StoredThread.init(row:))
    }

    func instances() throws -> [InstanceRecord] {
        try run(sql.instances, []).map(InstanceRecord.init(row:))
    }

    /// `tables`: SQLite's segments to prune row by row (PostgreSQL: its one table).
    func pruneByAge(_ maxAge: Double, now: Double, instance: String?, tables: [String] = ["events"]) throws -> Int {
        let mine = instance.map { [SQLValue.text($0)] } ?? []
        let statements = sql.pruneByAge(instance: instance != nil)
        if sql.dialect == .sqlite {
            // SQLite says how many rows its last DELETE took: no count before
            // and after (each reads a whole index); the requests kept in
            // those rows are counted first, in the range the DELETE reads.
            var removed = 0
            for table in tables {
                let values = [SQLValue.double(now - maxAge)] + mine
                let folded = try run(sql.foldedBeforeAge(instance: instance != nil, table: table), values)
                _ = try run(sql.pruneByAge(instance: instance != nil, table: table)[0], values)
                removed += try changes() + Int(folded.first?.first?.int ?? 0)
            }
            for statement in statements.dropFirst() { _ = try run(statement, [.double(now - maxAge)] + mine) }
            return removed
        }
        let before = try count(instance: instance)
        for statement in statements {
            _ = try run(statement, [.double(now - maxAge)] + mine)
        }
        return before - (try count(instance: instance))
    }

    /// Deletes the oldest `n` rows (of `instance`, or of all); how many
    /// events went (SQLite: the rows and the requests kept in them), nil
    /// where the dialect does not say (PostgreSQL).
    /// `table`: SQLite's segment to delete from.
    @discardableResult
    /// `below` (SQLite): rows from this id on stay (the newest batch).
    func deleteOldest(_ n: Int, instance: String?, table: String = "events", below: Int64 = .max) throws -> Int? {
        let values = (instance.map { [SQLValue.text($0)] } ?? []) + [.int(Int64(n))]
        guard sql.dialect == .sqlite else {
            _ = try run(sql.pruneOldest(instance: instance != nil), values)
            return nil
        }
        // SQLite binds in the text's order: the bound comes before the count.
        let bounded = (instance.map { [SQLValue.text($0)] } ?? []) + [.int(below), .int(Int64(n))]
        let folded =
            try run(sql.foldedInOldest(instance: instance != nil, table: table, bounded: true), bounded).first?.first?
            .int ?? 0
        _ = try run(sql.pruneOldest(instance: instance != nil, table: table, bounded: true), bounded)
        return try changes() + Int(folded)
    }

    /// Rows the connection's last INSERT, UPDATE or DELETE changed (SQLite).
    private func changes() throws -> Int {
        Int(try run("SELECT changes()", []).first?.first?.int ?? 0)
    }

    func count(instance: String? = nil) throws -> Int {
        Int(try run(sql.count(instance: instance != nil), instance.map { [.text($0)] } ?? []).first?.first?.int ?? 0)
    }

    func forget(instance: String, silentSince: Double) throws -> ForgetResult {
        if try !run(sql.forgetInstance, [.text(instance), .double(silentSince)]).isEmpty { return .forgotten }
        return try run(sql.selectInstance, [.text(instance)]).isEmpty ? .unknown : .running
    }
}
