import Foundation
import RunLoopCore

/// A perform's result as JSON text, written directly (no `Value` built):
/// `Rep.performResult`'s members in `JSON.serialize`'s order (keys sorted),
/// byte for byte. The caller's answer and the history's row are the same
/// text, made once per result (`PerformResult.text`) by whichever needs it
/// first: the history records the event before the caller is answered.
enum PerformJSON {
    /// The answer's body: `JSON.serialize(Rep.performResult(r))` and a newline.
    static func answer(_ r: PerformResult) -> [UInt8] {
        r.text.value { make(r) }
    }

    /// The history row's text: the answer's object with `at` first (it sorts
    /// first), no newline.
    static func row(_ r: PerformResult, at: Double) -> String {
        let answer = answer(r)
        var stamp: [UInt8] = []
        stamp.reserveCapacity(40)
        JSON.writeLiteral(#"{"at":""#, into: &stamp)
        Timestamp.append(Date(timeIntervalSince1970: at), to: &stamp)
        JSON.writeLiteral(#"","#, into: &stamp)
        // The answer without its `{` and its newline.
        let members = answer[1..<(answer.count - 1)]
        return String(unsafeUninitializedCapacity: stamp.count + members.count) { out in
            let end = out.initialize(fromContentsOf: stamp)
            return out[end...].initialize(fromContentsOf: members)
        }
    }

    private static func make(_ r: PerformResult) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(160)
        JSON.writeLiteral(#"{"error":"#, into: &out)
        let value: Value
        switch r.outcome {
        case .success(let result):
            JSON.writeLiteral(#"null,"ok":true"#, into: &out)
            value = result
        case .failure(let error):
            JSON.write(Rep.error(error), into: &out)
            JSON.writeLiteral(#","ok":false"#, into: &out)
            value = .null
        }
        JSON.writeLiteral(#","performId":"#, into: &out)
        JSON.writeString(r.performId, into: &out)
        JSON.writeLiteral(#","queuedMs":"#, into: &out)
        JSON.writeNumber(Rep.rounded3(r.queuedMs), into: &out)
        JSON.writeLiteral(#","ranMs":"#, into: &out)
        JSON.writeNumber(Rep.rounded3(r.ranMs), into: &out)
        JSON.writeLiteral(#","result":"#, into: &out)
        JSON.write(value, into: &out)
        JSON.writeLiteral(#","selector":"#, into: &out)
        JSON.writeString(r.selector, into: &out)
        JSON.writeLiteral(#","thread":"#, into: &out)
        JSON.writeString(r.thread, into: &out)
        JSON.writeLiteral("}\n", into: &out)
        return out
    }
}
