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
        append(#"{"at":""#, to: &stamp)
        Timestamp.append(Date(timeIntervalSince1970: at), to: &stamp)
        append(#"","#, to: &stamp)
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
        append(#"{"error":"#, to: &out)
        let value: Value
        switch r.outcome {
        case .success(let result):
            append(#"null,"ok":true"#, to: &out)
            value = result
        case .failure(let error):
            out.append(contentsOf: JSON.serialize(Rep.error(error)))
            append(#","ok":false"#, to: &out)
            value = .null
        }
        append(#","performId":"#, to: &out)
        JSON.writeString(r.performId, into: &out)
        append(#","queuedMs":"#, to: &out)
        appendNumber(Rep.rounded3(r.queuedMs), to: &out)
        append(#","ranMs":"#, to: &out)
        appendNumber(Rep.rounded3(r.ranMs), to: &out)
        append(#","result":"#, to: &out)
        switch value {
        case .null: append("null", to: &out)
        case .bool(let flag): flag ? append("true", to: &out) : append("false", to: &out)
        case .number(let number): appendNumber(number, to: &out)
        case .string(let text): JSON.writeString(text, into: &out)
        default: out.append(contentsOf: JSON.serialize(value))
        }
        append(#","selector":"#, to: &out)
        JSON.writeString(r.selector, into: &out)
        append(#","thread":"#, to: &out)
        JSON.writeString(r.thread, into: &out)
        append("}\n", to: &out)
        return out
    }

    /// Appends a literal's bytes (one copy, not a walk of its UTF-8 view).
    @inline(__always)
    static func append(_ literal: StaticString, to out: inout [UInt8]) {
        out.append(contentsOf: UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    /// Appends `JSON.format(value)`: an integer's digits without a `String`.
    static func appendNumber(_ value: Double, to out: inout [UInt8]) {
        guard value.isFinite, value.rounded() == value, abs(value) < 1e15 else {
            out.append(contentsOf: JSON.format(value).utf8)
            return
        }
        var whole = Int64(value)
        if whole < 0 {
            out.append(UInt8(ascii: "-"))
            whole = -whole
        }
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var start = 20
            repeat {
                start -= 1
                digits[start] = UInt8(48 + whole % 10)
                whole /= 10
            } while whole > 0
            out.append(contentsOf: UnsafeBufferPointer(rebasing: digits[start..<20]))
        }
    }
}
