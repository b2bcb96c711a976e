import RunLoopCore
import RunLoopServer
import RunloopdClient

/// The player's client: runloopd's one HTTP client (`HTTPClientConnection`,
/// the tests' too), one connection per request (`Connection: close`), JSON in
/// and out, the token sent when given.
public struct LabClient: Sendable {
    /// One answer.
    public struct Response: Sendable {
        /// The status code.
        public var status: Int
        /// The body parsed as JSON (`null` when empty or not JSON).
        public var json: Value
    }

    /// Why a request got no answer.
    public struct Failure: Error, CustomStringConvertible {
        /// What went wrong.
        public var description: String
        /// True when no connection could be made (no server there): nothing
        /// later will fare better, so the player gives up at once.
        public var unreachable = false
    }

    let host: String
    let port: UInt16
    let token: String?
    let timeout: Double

    /// A client for `http://host:port` (`url` is parsed by `init?(url:)`);
    /// `timeout` bounds each send and receive (also `runloopd healthcheck`'s probe).
    public init(host: String, port: UInt16, token: String? = nil, timeout: Double = 70) {
        self.host = host
        self.port = port
        self.token = token
        self.timeout = timeout
    }

    /// A client for an `http://host[:port]` URL.
    public init?(url: String, token: String? = nil) {
        guard url.hasPrefix("http://") else { return nil }
        var rest = url.dropFirst("http://".count)
        if let slash = rest.firstIndex(of: "/") { rest = rest[..<slash] }
        var host = String(rest)
        var port: UInt16 = 80
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return nil }
            let after = host[host.index(after: close)...]
            if after.hasPrefix(":") {
                guard let p = UInt16(after.dropFirst()) else { return nil }
                port = p
            }
            host = String(host[host.index(after: host.startIndex)..<close])
        } else if let colon = host.lastIndex(of: ":") {
            guard let p = UInt16(host[host.index(after: colon)...]) else { return nil }
            port = p
            host = String(host[..<colon])
        }
        guard !host.isEmpty else { return nil }
        self.init(host: host, port: port, token: token)
    }

    /// Sends one request on a connection of its own (`Connection: close`) and
    /// reads the whole answer.
    public func send(_ method: String, _ path: String, body: Value? = nil) throws(Failure) -> Response {
        let connection: HTTPClientConnection
        do throws(HTTPClientError) {
            connection = try HTTPClientConnection(host: host, port: port, timeout: timeout)
        } catch {
            throw Failure(description: error.description, unreachable: error.unreachable)
        }
        defer { connection.close() }
        let authority = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        var headers = [("Host", authority), ("Accept", "application/json"), ("User-Agent", "runloopd-play")]
        if let token, !token.isEmpty { headers.append(("Authorization", "Bearer \(token)")) }
        let answer: HTTPClientResponse
        do throws(HTTPClientError) {
            answer = try connection.request(
                method, path, body: body.map(JSON.serialize), contentType: body == nil ? nil : "application/json",
                headers: headers)
        } catch {
            throw Failure(description: "no answer to \(method) \(path): \(error.description)")
        }
        let json = answer.body.isEmpty ? Value.null : ((try? JSON.parse(answer.body)) ?? .null)
        return Response(status: answer.status, json: json)
    }
}
