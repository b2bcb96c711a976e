import Foundation
import Logging
import Primitives
import RunLoopServer
import Synchronization

/// Where log lines go: standard error, written by one writer thread in
/// batches, so a request's access-log line never costs its HTTP or control
/// thread a `write` (into a pipe, that is a wake-up of the reader per line)
/// nor its formatting: an access entry is queued as data and the writer
/// formats it (other lines arrive formatted). A caller appends under a lock
/// and goes on; the writer takes everything pending and writes it at once. Idle, the writer sleeps on
/// a condition (no polling). Bounded: past `limit` pending bytes new lines
/// are dropped and counted, and the count is reported once there is room.
/// `flush()` (every exit path, and `atexit`) writes what is pending before
/// the process ends, so a clean stop loses no line.
final class LogSink: AccessLogWriter {
    /// Standard error, for the whole process.
    static let standardError = LogSink(fd: 2)

    /// One queued line: bytes already formatted, or an access-log entry the
    /// writer formats (the request's thread only copies it in).
    private enum Item {
        case bytes([UInt8])
        case access(AccessLogEntry)
    }

    private struct State {
        var pending: [Item] = []
        var pendingBytes = 0
        var writing = false
        var started = false
        var dropped = 0
        var reportedDropped = 0
        var formatAccess: AccessFormat = { entry, out in out.append(contentsOf: "\(entry.message)\n".utf8) }
        var formatNote: @Sendable (String) -> String = { "runloopd: \($0)\n" }
    }

    private let fd: Int32
    private let limit: Int
    private let state = Locked(State())

    /// An access entry is counted at this size against `limit` until formatted.
    private static let accessEstimate = 160

    /// How long the writer lets lines gather after a write, in nanoseconds:
    /// the most a line waits for its write beyond the one before it.
    private static let gatherNanoseconds = 5_000_000

    init(fd: Int32, limit: Int = 8 << 20) {
        self.fd = fd
        self.limit = limit
    }

    /// Appends an access entry's line to `out`.
    typealias AccessFormat = @Sendable (AccessLogEntry, inout [UInt8]) -> Void

    /// How access entries become lines (the text or JSON handler's format).
    func formatAccessLines(_ format: @escaping AccessFormat) {
        state.withLock { $0.formatAccess = format }
    }

    /// How the writer's own notes (lines it dropped) become lines: a
    /// warning in the log's format.
    func formatNotes(_ format: @escaping @Sendable (String) -> String) {
        state.withLock { $0.formatNote = format }
    }

    /// Queues an access-log entry, formatted later by the writer thread.
    func record(_ entry: AccessLogEntry) {
        enqueue(.access(entry), bytes: Self.accessEstimate)
    }

    /// Queues one line (already formatted, newline included).
    func append(_ line: String) {
        enqueue(.bytes(Array(line.utf8)), bytes: line.utf8.count)
    }

    private func enqueue(_ item: Item, bytes: Int) {
        let (start, wake) = state.withLock { s -> (Bool, Bool) in
            guard s.pendingBytes + bytes <= limit else {
                s.dropped += 1
                return (false, false)
            }
            // The writer waits only for an empty queue to fill (a flush only
            // for it to finish): one wake-up per batch, not per line.
            let wasEmpty = s.pending.isEmpty
            s.pending.append(item)
            s.pendingBytes += bytes
            defer { s.started = true }
            return (!s.started, wasEmpty)
        }
        if start { startWriter() }
        if wake { state.notifyAll() }
    }

    /// Writes everything pending now (waiting for the writer if it is busy).
    func flush() {
        let (items, format) = state.withLock(when: { !$0.writing }) { s in
            defer {
                s.pending.removeAll(keepingCapacity: true)
                s.pendingBytes = 0
            }
            return (s.pending, s.formatAccess)
        }
        write(Self.render(items, format))
    }

    private static func render(_ items: [Item], _ format: AccessFormat) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(items.count * accessEstimate)
        for item in items {
            switch item {
            case .bytes(let bytes): out.append(contentsOf: bytes)
            case .access(let entry): format(entry, &out)
            }
        }
        return out
    }

    private func startWriter() {
        var thread = pthread_t()
        let box = Unmanaged.passRetained(self)
        let status = pthread_create(
            &thread, nil,
            { raw in
                guard let raw else { return nil }
                Unmanaged<LogSink>.fromOpaque(raw).takeRetainedValue().writerLoop()
                return nil
            }, box.toOpaque())
        if status == 0 {
            pthread_detach(thread)
        } else {
            box.release()
            flush()
        }
    }

    private func writerLoop() {
        var spare: [Item] = []
        while true {
            let (items, format, dropped, formatNote) = state.withLock(when: { !$0.pending.isEmpty }) {
                s -> ([Item], AccessFormat, Int, @Sendable (String) -> String) in
                var items = spare
                swap(&items, &s.pending)
                s.pendingBytes = 0
                s.writing = true
                let dropped = s.dropped - s.reportedDropped
                s.reportedDropped = s.dropped
                return (items, s.formatAccess, dropped, s.formatNote)
            }
            // The note is formatted after the lock, as every line is.
            let droppedNote =
                dropped > 0
                ? formatNote(
                    "\(dropped) log line(s) dropped: the log writer fell more than \(limit >> 20) MiB behind") : nil
            // Formatting happens here, on the writer's thread.
            write(Self.render(items, format))
            if let droppedNote { write(Array(droppedNote.utf8)) }
            spare = items
            spare.removeAll(keepingCapacity: true)
            state.withLock { $0.writing = false }
            state.notifyAll()
            // Lines that come meanwhile gather for a moment: under load the next
            // write carries many, and a request thread seldom has a sleeping
            // writer to wake (a wake-up is a futex call on its own path). This is
            // a pause after work, never a poll: idle, the writer waits on the
            // condition above. `flush()` does not wait for it.
            var pause = timespec(tv_sec: 0, tv_nsec: Self.gatherNanoseconds)
            var left = timespec()
            while nanosleep(&pause, &left) != 0 && errno == EINTR { pause = left }
        }
    }

    private func write(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { buffer in
            guard let base = buffer.baseAddress else { return }
            var offset = 0
            while offset < buffer.count {
                let written = Glibc.write(fd, base + offset, buffer.count - offset)
                if written < 0 && errno == EINTR { continue }
                if written <= 0 { break }
                offset += written
            }
        }
    }
}

/// How `SinkLogHandler` writes a line.
enum LogFormat: String, CaseIterable, Sendable {
    /// `timestamp level label : key=value … [source] message` (`TextLogLine`).
    case text
    /// One JSON object per line (`JSONLogLine`).
    case json
}

/// The log level of the whole process: every `SinkLogHandler` (and so every
/// `Logger` copy the service keeps) reads it on each call, so a SIGHUP that
/// rereads `--log-level-file` changes it everywhere at once. One atomic
/// load per check; no lock.
final class LogLevelSwitch: Sendable {
    /// The process's level.
    static let shared = LogLevelSwitch(.info)

    private let index: Atomic<Int>
    private static let levels = Logger.Level.allCases

    init(_ level: Logger.Level) {
        index = Atomic(Self.levels.firstIndex(of: level) ?? 2)
    }

    /// The level now.
    var level: Logger.Level { Self.levels[index.load(ordering: .relaxed)] }

    /// Sets the level; returns the one it replaced.
    @discardableResult
    func set(_ level: Logger.Level) -> Logger.Level {
        Self.levels[index.exchange(Self.levels.firstIndex(of: level) ?? 2, ordering: .relaxed)]
    }
}

/// The swift-log handler of `runloopd`: every line, in the chosen format,
/// through `LogSink` (standard error, written by the log writer thread).
struct SinkLogHandler: LogHandler {
    let label: String
    /// The process's level (`LogLevelSwitch`): setting it here sets it for every handler.
    var logLevel: Logger.Level {
        get { levels.level }
        set { levels.set(newValue) }
    }
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?
    let format: LogFormat
    let sink: LogSink
    let levels: LogLevelSwitch

    init(label: String, format: LogFormat, levels: LogLevelSwitch = .shared, sink: LogSink = .standardError) {
        self.label = label
        self.levels = levels
        self.format = format
        self.sink = sink
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        // A log call is a call-out: never under a lock (debug builds stop here).
        LockCheck.assertNoneHeld("a log call (\(event.source): \(event.message))")
        var fields = metadata
        if let provided = metadataProvider?.get() { fields.merge(provided) { $1 } }
        if let extra = event.metadata { fields.merge(extra) { $1 } }
        let keys = fields.keys.sorted()
        let message = "\(event.message)"
        switch format {
        case .text:
            let pairs = keys.map { ($0, fields[$0].map { "\($0)" } ?? "") }
            sink.append(
                TextLogLine.line(
                    at: Date(), level: event.level, label: label, fields: pairs, source: event.source, message: message)
            )
        case .json:
            // Numbers and booleans given as values (`.stringConvertible(42)`) stay JSON numbers and booleans.
            let pairs = keys.map { ($0, fields[$0].map(JSONLogLine.value) ?? .string("")) }
            sink.append(
                JSONLogLine.line(
                    at: Date(), level: event.level, label: label, message: message, source: event.source,
                    values: pairs)
            )
        }
    }

    /// How the log writer turns access entries into lines of this format.
    static func accessLines(_ format: LogFormat) -> LogSink.AccessFormat {
        switch format {
        case .text: TextLogLine.appendAccessLine
        case .json: JSONLogLine.appendAccessLine
        }
    }
}

/// The text log format: `timestamp level label : key=value … [source] message`.
enum TextLogLine {
    /// One text line: `timestamp level label : k=v … [source] message`.
    static func line(
        at date: Date, level: Logger.Level, label: String, fields: [(String, String)], source: String,
        message: String
    ) -> String {
        var line = Timestamp.string(date)
        line += " \(level) \(label) :"
        for (key, value) in fields { line += " \(LogEscape.text(key))=\(LogEscape.text(value))" }
        line += " [\(source)] \(LogEscape.text(message))\n"
        return line
    }

    /// An access entry in the same format as `SinkLogHandler` writes it (fields sorted),
    /// appended as bytes: no intermediate strings, so the writer spends well
    /// under a microsecond per line.
    static func appendAccessLine(_ e: AccessLogEntry, to out: inout [UInt8]) {
        Timestamp.append(e.at, to: &out)
        out.append(
            contentsOf: e.level == .debug ? " debug runloopd : durationMs=".utf8 : " info runloopd : durationMs=".utf8)
        appendMillis(e.seconds, to: &out)
        out.append(contentsOf: " remote=".utf8)
        LogEscape.append(e.remote ?? "-", to: &out)
        out.append(contentsOf: " requestId=".utf8)
        LogEscape.append(e.requestId, to: &out)
        out.append(contentsOf: " route=".utf8)
        LogEscape.append(e.route, to: &out)
        out.append(contentsOf: " status=".utf8)
        out.appendDecimal(e.status)
        out.append(contentsOf: " [RunLoopServer] ".utf8)
        LogEscape.append(e.method, to: &out)
        out.append(32)
        LogEscape.append(e.path, to: &out)
        out.append(32)
        out.appendDecimal(e.status)
        out.append(10)
    }

    /// Seconds as milliseconds with up to three decimals, as Swift prints
    /// `(seconds * 1e6).rounded() / 1000` (`0.329`, `12.5`, `3.0`).
    static func appendMillis(_ seconds: Double, to out: inout [UInt8]) {
        let micros = Int((seconds * 1e6).rounded())
        out.appendDecimal(micros / 1000)
        out.append(46)  // .
        var fraction = micros % 1000
        if fraction == 0 {
            out.append(48)
            return
        }
        var width = 3
        while fraction % 10 == 0 {
            fraction /= 10
            width -= 1
        }
        out.appendDecimal(fraction, digits: width)
    }
}

/// Makes what a client sent safe to print in a text log line: control
/// characters (C0, DEL, C1), a backslash, and Unicode's bidi and invisible
/// format characters become visible escapes (`\x1b`, `\\`, `\u{202E}`), so a
/// request line cannot move an operator's cursor, clear the terminal, forge a
/// second line or reorder what a line shows. Plain printable text (the usual
/// case) is copied as it is.
enum LogEscape {
    /// `text`, escaped.
    static func text(_ text: String) -> String {
        guard needsEscaping(text) else { return text }
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count + 16)
        escape(text, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Appends `text`, escaped, as UTF-8.
    static func append(_ text: String, to out: inout [UInt8]) {
        if needsEscaping(text) {
            escape(text, to: &out)
        } else {
            out.append(contentsOf: text.utf8)
        }
    }

    private static func needsEscaping(_ text: String) -> Bool {
        text.utf8.contains { $0 < 0x20 || $0 >= 0x7f || $0 == UInt8(ascii: "\\") }
    }

    private static func escape(_ text: String, to out: inout [UInt8]) {
        let hex = Array("0123456789abcdef".utf8)
        for scalar in text.unicodeScalars {
            let value = scalar.value
            if value < 0x20 || value == 0x7f {
                out.append(contentsOf: [
                    UInt8(ascii: "\\"), UInt8(ascii: "x"), hex[Int(value >> 4)], hex[Int(value & 0xf)],
                ])
            } else if value == 0x5c {
                out.append(contentsOf: [0x5c, 0x5c])
            } else if (0x80...0x9f).contains(value) || isFormat(value) {
                out.append(contentsOf: "\\u{\(String(value, radix: 16, uppercase: true))}".utf8)
            } else {
                out.append(contentsOf: String(scalar).utf8)
            }
        }
    }

    /// Bidi controls and invisible format characters.
    private static func isFormat(_ value: UInt32) -> Bool {
        (0x200B...0x200F).contains(value) || (0x202A...0x202E).contains(value) || (0x2066...0x2069).contains(value)
            || value == 0x061C || value == 0xFEFF
    }
}
