import Foundation

/// Runs `body` with a path of its own in the temporary folder,
/// `prefix-<UUID>` (made there as an empty folder when `folder`), and removes
/// whatever is at that path once `body` returns or throws: a test's scratch
/// file or data folder is never left behind.
public func withTemporaryPath<T>(
    _ prefix: String, folder: Bool = false, isolation: isolated (any Actor)? = #isolation,
    _ body: (URL) async throws -> T
) async throws -> T {
    let url = try temporaryPath(prefix, folder: folder)
    defer { try? FileManager.default.removeItem(at: url) }
    return try await body(url)
}

/// `withTemporaryPath` for a body that does not wait.
public func withTemporaryPath<T>(_ prefix: String, folder: Bool = false, _ body: (URL) throws -> T) throws -> T {
    let url = try temporaryPath(prefix, folder: folder)
    defer { try? FileManager.default.removeItem(at: url) }
    return try body(url)
}

private func temporaryPath(_ prefix: String, folder: Bool) throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
    if folder { try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true) }
    return url
}
