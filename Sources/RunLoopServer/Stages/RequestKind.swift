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

    /// `/api/threads/{id}/predict`: five segments, the fourth not empty. Read
    /// in place, byte by byte: it is asked of every POST and DELETE.
    static func isPredict(_ path: String) -> Bool {
        let prefix = "/api/threads/".utf8
        let suffix = "/predict".utf8
        let bytes = path.utf8
        guard bytes.count > prefix.count + suffix.count, bytes.starts(with: prefix),
            bytes.suffix(suffix.count).elementsEqual(suffix)
        else { return false }
        return !bytes.dropFirst(prefix.count).dropLast(suffix.count).contains(UInt8(ascii: "/"))
    }
}
