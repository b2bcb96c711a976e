import Foundation

/// One Server-Sent-Events connection, read on a thread of its own over a
/// `TestHTTPConnection`; each event's data is turned into a `Payload` by the
/// `decode` closure given at the start.
// @unchecked: the decode closure and connection are used only by its reader thread.
public final class EventStreamClient<Payload: Sendable>: @unchecked Sendable {
    public struct Event: Sendable {
        public let name: String
        public let id: String?
        public let data: Payload
        public let receivedAt: Date
    }

    public struct State: Sendable {
        public var events: [Event] = []
        /// The answer's status and headers, once its head arrived.
        public var status: Int?
        public var headers: [(String, String)] = []
        /// Every byte of the (de-chunked) body so far, comments included.
        public var text = ""
        public var closed = false
    }

    public let state = Monitor(State())
    private let connection: TestHTTPConnection

    /// Connects to `GET path` (with `headers`) and starts reading.
    public init(
        port: UInt16, path: String, headers: [(String, String)] = [],
        decode: @escaping @Sendable (String) -> Payload
    ) throws {
        connection = try TestHTTPConnection(port: port, timeout: 0)
        let request = HTTPWire.request(
            "GET", path, body: nil, contentType: nil, headers: [("Accept", "text/event-stream")] + headers,
            keepAlive: true)
        connection.write(request)
        let (connection, state) = (self.connection, self.state)
        Thread.detachNewThread { Self.readLoop(connection, state, decode) }
    }

    private static func readLoop(
        _ connection: TestHTTPConnection, _ state: Monitor<State>, _ decode: (String) -> Payload
    ) {
        var decoder = HTTPResponseDecoder()
        var pending: [UInt8] = []
        while let chunk = try? connection.read(), !chunk.isEmpty {
            decoder.feed(chunk)
            guard let status = decoder.status else { continue }
            let arrived = decoder.body
            decoder.body = []
            pending += arrived
            // Complete events end with a blank line.
            var events: [Event] = []
            while let end = HTTPWire.find([10, 10], in: pending) {
                let block = String(decoding: pending[0..<end], as: UTF8.self)
                pending.removeFirst(end + 2)
                if let event = parse(block, decode) { events.append(event) }
            }
            state.update {
                $0.status = status
                $0.headers = decoder.headers
                $0.text += String(decoding: arrived, as: UTF8.self)
                $0.events += events
            }
        }
        // The reader owns the socket: it closes it under the state lock, so
        // `disconnect` never shuts down a reused descriptor.
        state.update {
            $0.closed = true
            connection.close()
        }
    }

    /// One event block; nil for a block of comments only (a heartbeat).
    private static func parse(_ block: String, _ decode: (String) -> Payload) -> Event? {
        var name = "message"
        var id: String?
        var data: [String] = []
        for line in block.split(separator: "\n", omittingEmptySubsequences: false) {
            let (field, value) = field(line)
            switch field {
            case "event": name = value
            case "id": id = value
            case "data": data.append(value)
            default: break
            }
        }
        let joined = data.joined(separator: "\n")
        if name == "message" && joined.isEmpty { return nil }
        return Event(name: name, id: id, data: decode(joined), receivedAt: Date())
    }

    private static func field(_ line: Substring) -> (String, String) {
        guard let colon = line.firstIndex(of: ":") else { return (String(line), "") }
        var value = line[line.index(after: colon)...]
        if value.first == " " { value = value.dropFirst() }
        return (String(line[..<colon]), String(value))
    }

    /// Waits for an event matching `predicate`; returns it, or nil after
    /// `timeout` seconds or once the stream closed without one.
    public func next(timeout: Double, where predicate: (Event) -> Bool) -> Event? {
        var found: Event?
        state.wait(timeout: timeout) { state in
            found = state.events.first(where: predicate)
            return found != nil || state.closed
        }
        return found
    }

    /// Waits until the body so far contains `text`.
    public func waitForText(_ text: String, timeout: Double = 10) -> Bool {
        state.wait(timeout: timeout) { $0.text.contains(text) }
    }

    /// Closes the connection (the reader thread ends and closes the socket).
    public func disconnect() {
        state.update { if !$0.closed { connection.shutdownBoth() } }
    }

    deinit { disconnect() }
}
