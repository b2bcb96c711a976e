/// One HTTP request, fully read (headers and a bounded body), as a value.
///
/// The HTTP layer builds it on a libmicrohttpd thread and hands it to an
/// `HTTPRequestHandler`; it never touches run-loop objects itself.
public struct HTTPRequest: Sendable {
    /// Process-unique, increasing request number (also used as a request id).
    public var id: UInt64
    /// Method as sent, upper-case (`GET`, `POST`, …).
    public var method: String
    /// The path without the query string, percent-decoding NOT applied.
    public var path: String
    /// Query arguments (first value wins for repeated keys), percent-decoded.
    public var query: [String: String]
    /// Header fields; a repeated field's values joined with `, `.
    public var headers: HTTPHeaders
    /// The request body (bounded by the server's body limit).
    public var body: [UInt8]
    /// The peer, when known (its text is made when read).
    public var peer: PeerAddress?
    /// The peer address as text (`127.0.0.1`), when known.
    public var remoteAddress: String? { peer?.text }

    /// Creates a request value (tests and in-process callers use this directly).
    public init(
        id: UInt64 = 0, method: String, path: String, query: [String: String] = [:],
        headers: HTTPHeaders = [:], body: [UInt8] = [], remoteAddress: String? = nil
    ) {
        self.id = id
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.peer = remoteAddress.map(PeerAddress.init(text:))
    }
}

/// One HTTP response: status, header fields and either a body or an event stream.
public struct HTTPResponse: Sendable {
    /// The status code (200, 404, …).
    public var status: Int
    /// Header fields in order (`Content-Type` included here, not implied).
    public var headers: [(String, String)]
    /// The body bytes (ignored when `stream` is set).
    public var body: [UInt8]
    /// When set, the response is a never-ending chunked stream fed by this object
    /// (Server-Sent Events).
    public var stream: EventStream?
    /// The machine-readable code of an error answer, kept beside its body by
    /// whoever built it (for metrics labels, so nobody parses the body back).
    public var errorCode: String?

    /// Creates a response.
    public init(status: Int, headers: [(String, String)] = [], body: [UInt8] = [], stream: EventStream? = nil) {
        self.status = status
        self.headers = headers
        self.body = body
        self.stream = stream
    }
}

/// What the HTTP layer calls for every complete request.
///
/// `handle` runs on a libmicrohttpd thread and must not block. It calls `respond`
/// exactly once, from any thread, now or later; until then the connection is
/// suspended.
public protocol HTTPRequestHandler: Sendable {
    /// Handles one request; `respond` must be called exactly once.
    func handle(_ request: HTTPRequest, respond: @escaping @Sendable (HTTPResponse) -> Void)

    /// How the layer's own refusals look (413 body too large, 503 while
    /// stopping); by default plain text.
    func response(for refusal: HTTPRefusal) -> HTTPResponse
}

extension HTTPRequestHandler {
    /// Plain text: `code: message`.
    public func response(for refusal: HTTPRefusal) -> HTTPResponse { HTTPRefusal.plainText(refusal) }
}

/// A request's header fields in arrival order, looked up by name ignoring
/// ASCII case.
///
/// A request carries a handful of fields and the server reads a few of them,
/// so a list scanned on lookup is cheaper than hashing every name into a
/// dictionary that is mostly never read.
public struct HTTPHeaders: Sendable, ExpressibleByDictionaryLiteral {
    /// The fields, each name once (a repeated field's values already joined).
    public private(set) var fields: [(name: String, value: String)] = []

    /// No fields.
    public init() {}

    /// The given fields (names in any case; a repeated name is joined like on the wire).
    public init(dictionaryLiteral elements: (String, String)...) {
        for (name, value) in elements { append(name, value) }
    }

    /// The value of the field `name` (any case), nil when absent.
    public subscript(_ name: String) -> String? {
        for field in fields where Self.sameName(field.name, name) {
            return field.value
        }
        return nil
    }

    /// Adds a field; a name already present (in any case) gets `value` appended
    /// to its list (RFC 9110 §5.3: two Hosts or two Origins become one value no
    /// check accepts, instead of letting the last one win).
    public mutating func append(_ name: String, _ value: String) {
        if fields.isEmpty { fields.reserveCapacity(8) }
        if let index = fields.firstIndex(where: { Self.sameName($0.name, name) }) {
            fields[index].value += ", " + value
        } else {
            fields.append((name, value))
        }
    }

    /// Whether two field names are equal ignoring ASCII case.
    static func sameName(_ a: String, _ b: String) -> Bool {
        guard a.utf8.count == b.utf8.count else { return false }
        // Byte by byte over contiguous storage (native strings are): zip over
        // two UTF-8 views costs more than the comparison itself.
        let compared = a.utf8.withContiguousStorageIfAvailable { x in
            b.utf8.withContiguousStorageIfAvailable { y in sameLetters(x, y) }
        }
        return (compared ?? nil) ?? sameLetters(Array(a.utf8), Array(b.utf8))
    }

    private static func sameLetters<C: RandomAccessCollection>(_ x: C, _ y: C) -> Bool
    where C.Element == UInt8, C.Index == Int {
        for index in x.indices where x[index] != y[index] {
            let folded = x[index] | 0x20
            guard folded == y[index] | 0x20, (0x61...0x7A).contains(folded) else { return false }
        }
        return true
    }
}
