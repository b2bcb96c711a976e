// The tests' HTTP client is runloopd's one client (`RunloopdClient`, which
// `runloopd play` and `healthcheck` use too); a test that imports
// RunLoopTestSupport sees it, under the names the tests have always used.
@_exported import RunloopdClient

/// The tests' name for `HTTPClientConnection`.
public typealias TestHTTPConnection = HTTPClientConnection
/// The tests' name for `HTTPClientResponse`.
public typealias TestHTTPResponse = HTTPClientResponse
/// The tests' name for `HTTPClientError` (a failure of the client or launcher, not an assertion).
public typealias TestHTTPError = HTTPClientError
