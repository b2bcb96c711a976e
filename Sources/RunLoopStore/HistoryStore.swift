import Foundation
import Primitives

/// The interface the server writes to and reads from. Writes come from one
/// writer thread; reads from the server's reader queue (implementations let
/// them overlap: SQLite in WAL mode, a second PostgreSQL connection).
public protocol HistoryStore: AnyObject, Sendable {
    /// `sqlite` or `postgres`.
    var kind: String { get }
    /// Where it is (a path, or the URL without its password).
    var location: String { get }
    /// Connects and creates or migrates the schema.
    func open() throws
    /// Records this start of `instance`: counts the boot, chooses the first
    /// event id, marks the threads of earlier starts that never ended as `lost`.
    func register(_ instance: InstanceRecord) throws -> Registration
    /// Writes one batch in one transaction.
    func write(_ batch: StoreBatch) throws
    /// Marks a clean stop.
    func markStopped(instance: String, at: Double) throws
    /// Events matching `query`.
    func events(_ query: HistoryQuery) throws -> [StoredEvent]
    /// Threads remembered, newest first.
    func threads(instance: String?, boot: Int64?, limit: Int) throws -> [StoredThread]
    /// Every instance that wrote to this store.
    func instances() throws -> [InstanceRecord]
    /// Applies the retention; returns how many events went. `yield` is asked
    /// between steps: true stops the prune there (what is left is taken up by
    /// the next call), so that a writer with events waiting gets back to them.
    func prune(_ retention: Retention, now: Double, yield: () -> Bool) throws -> Int
    /// Whether the store is past `retention`'s size bound now, by a check
    /// cheap enough for every commit (SQLite: the file and its WAL); false
    /// when it cannot tell without a query (PostgreSQL: the periodic prune measures).
    func overLimit(_ retention: Retention) -> Bool
    /// The space the store uses (bytes).
    func size() throws -> Int64
    /// Forgets an instance that is not running (`DELETE /api/fleet/{id}`): its
    /// row goes if it stopped cleanly or its heartbeat is older than
    /// `silentSince`; its events and threads stay (retention takes them).
    /// The check and the delete are one statement, so an instance that beats
    /// meanwhile stays.
    func forget(instance: String, silentSince: Double) throws -> ForgetResult
    /// Names the connections after this instance (PostgreSQL's `application_name`).
    func identify(instance: String)
    /// Closes connections (the store may be opened again).
    func close()
}

extension HistoryStore {
    /// Applies the whole retention (nothing waits for the store).
    public func prune(_ retention: Retention, now: Double) throws -> Int {
        try prune(retention, now: now, yield: { false })
    }
    public func overLimit(_ retention: Retention) -> Bool { false }
    public func identify(instance: String) {}
}

/// What `forget` did.
public enum ForgetResult: Sendable, Equatable {
    case forgotten
    /// No instance has that id.
    case unknown
    /// It is running (a fresh heartbeat, no clean stop).
    case running
}
