/// Which requests change the service's state: those are kept in the
/// journal (`--journal`, replayed) and the history. A POST that only
/// answers a question, such as `POST /api/threads/{id}/predict`, changes
/// nothing and is kept in neither. The request guard still applies to it
/// as to every POST.
enum RequestKind {
    /// Whether `method` on `path` (no query string) changes state.
    static func changesState(method: String, path: String) -> Bool {
        guard method == "POST" || method == "DELETE" else { return false }
        return !(method == "POST" && isPredict(path))
    }

    /// `/api/threads/{id}/predict`.
    static func isPredict(_ path: String) -> Bool {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        return parts.count == 5 && parts[0].isEmpty && parts[1] == "api" && parts[2] == "threads"
            && !parts[3].isEmpty && parts[4] == "predict"
    }
}
