import RunLoopTestSupport

extension TestHTTPConnection {
    /// One keep-alive request with an optional JSON body: the benchmarks' one
    /// shape of request (one in flight, for sequential latency measurements).
    func json(_ method: String, _ path: String, body: String? = nil) throws -> TestHTTPResponse {
        try request(
            method, path, body: body.map { Array($0.utf8) }, contentType: body == nil ? nil : "application/json",
            keepAlive: true)
    }
}
