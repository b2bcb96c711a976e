import Foundation
import Logging
import Primitives
import RunLoopServer

/// Where log lines go: standard error, written by one writer thread in
/// batches, so a request's access-log line never costs its HTTP or control
/// thread a `write` (into a pipe, that is a wake-up of the reader per line).
/// A caller appends the formatted bytes under a lock and goes on; the writer
/// takes everything pending and writes it at once. Idle, the writer sleeps on
/// a condition (no polling). Bounded: past `limit` pending bytes new lines
/// are dropped and counted, and the count is reported once there is room.
/// `flush()` (every exit path, and `atexit`) writes what is pending before
/// the process ends, so a clean stop loses no line.
final class LogSink: Sendable {
    /// Standard error, for the whole process.
    static let standardError = LogSink(fd: 2)

    private struct State {
        var pending: [UInt8] = []
        var spare: [UInt8] = []
        var writing = false
        var started = false
        var dropped = 0
        var reportedDropped = 0
    }

    private let fd: Int32
    private let limit: Int
    private let state = Locked(State())

    init(fd: Int32, limit: Int = 8 << 20) {
        self.fd = fd
        self.limit = limit
    }

    /// Queues one line (already formatted, newline included).
    func append(_ line: String) {
        var line = line
        let (start, wake) = line.withUTF8 { bytes in
            state.withLock { s -> (Bool, Bool) in
                guard s.pending.count + bytes.count <= limit else {
                    s.dropped += 1
                    return (false, false)
                }
                // The writer waits only for an empty queue to fill (a flush
                // only for it to finish): one wake-up per batch, not per line.
                let wasEmpty = s.pending.isEmpty
                s.pending.append(contentsOf: bytes)
                defer { s.started = true }
                return (!s.started, wasEmpty)
            }
        }
        if start { startWriter() }
        if wake { state.notifyAll() }
    }

    /// Writes everything pending now (on the caller's thread when the writer
    /// is busy elsewhere, it waits for it).
    func flush() {
        let bytes: [UInt8] = state.withLock(when: { !$0.writing }) { s in
            defer { s.pending.removeAll(keepingCapacity: true) }
            return s.pending
        }
        write(bytes)
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
        while true {
            let (batch, droppedNote) = state.withLock(when: { !$0.pending.isEmpty }) { s -> ([UInt8], String?) in
                var batch = s.spare
                swap(&batch, &s.pending)
                s.writing = true
                var note: String?
                if s.dropped > s.reportedDropped {
                    note =
                        "runloopd: \(s.dropped - s.reportedDropped) log line(s) dropped: the log writer fell more than \(limit >> 20) MiB behind\n"
                    s.reportedDropped = s.dropped
                }
                return (batch, note)
            }
            write(batch)
            if let droppedNote { write(Array(droppedNote.utf8)) }
            state.withLock { s in
                s.writing = false
                var emptied = batch
                emptied.removeAll(keepingCapacity: true)
                s.spare = emptied
            }
            state.notifyAll()
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

/// A swift-log handler writing `timestamp level label : key=value … message`
/// lines (`--log-format text`, the default) through `LogSink`.
struct TextLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?
    let sink: LogSink

    init(label: String, level: Logger.Level, sink: LogSink = .standardError) {
        self.label = label
        self.logLevel = level
        self.sink = sink
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var fields = metadata
        if let provided = metadataProvider?.get() { fields.merge(provided) { $1 } }
        if let extra = event.metadata { fields.merge(extra) { $1 } }
        var line = Timestamp.string(Date())
        line += " \(event.level) \(label) :"
        for key in fields.keys.sorted() { line += " \(key)=\(fields[key].map { "\($0)" } ?? "")" }
        line += " [\(event.source)] \(event.message)\n"
        sink.append(line)
    }
}
