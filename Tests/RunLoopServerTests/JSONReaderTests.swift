import CoreFoundation
import Foundation
import RunLoopCore
import Testing

@testable import RunLoopServer

/// The JSON reader against Foundation's `JSONSerialization` (the reference) on
/// hand-picked documents, round trips of generated values, and mutated bytes.
@Suite struct JSONReaderTests {
    /// Foundation's reading of `text` as a `Value`, or nil when it refuses it.
    static func reference(_ bytes: [UInt8]) -> Value? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(bytes), options: [.fragmentsAllowed])
        else { return nil }
        return convert(object)
    }

    static func convert(_ object: Any) -> Value? {
        switch object {
        case is NSNull: return .null
        case let number as NSNumber:
            if number === kCFBooleanTrue { return .bool(true) }
            if number === kCFBooleanFalse { return .bool(false) }
            return .number(number.doubleValue)
        case let text as String: return .string(text)
        case let items as [Any]:
            var values: [Value] = []
            for item in items {
                guard let value = convert(item) else { return nil }
                values.append(value)
            }
            return .array(values)
        case let members as [String: Any]:
            var values: [String: Value] = [:]
            for (key, item) in members {
                guard let value = convert(item) else { return nil }
                values[key] = value
            }
            return .object(values)
        default: return nil
        }
    }

    /// Equal, but numbers within a relative 1e-12: Foundation rounds long digit
    /// strings imprecisely (ours go through Swift's correctly rounded parser).
    static func same(_ a: Value, _ b: Value) -> Bool {
        switch (a, b) {
        case (.number(let x), .number(let y)): return x == y || abs(x - y) <= 1e-12 * max(abs(x), abs(y))
        case (.array(let xs), .array(let ys)): return xs.count == ys.count && zip(xs, ys).allSatisfy { same($0, $1) }
        case (.object(let xs), .object(let ys)):
            return xs.count == ys.count && xs.allSatisfy { key, x in ys[key].map { same(x, $0) } ?? false }
        default: return a == b
        }
    }

    static let accepted = [
        #"{"selector":"echo","args":{"n":1},"waitUntilDone":true}"#, "0", "-0", "1.5", "-12.25e-3", "1E+2", "1e2",
        "123456789012345678901234567890", "0.1", "\"\"", #""a\"b\\c\/d\b\f\n\r\t""#,
        #""\u00e9\u4e2d\ud83d\ude00""#, "\"é中😀\"", "[]", "{}", " [ 1 , 2 ,3 ] ", "\t\n\r null \n", "true", "false",
        #"[[[[[]]]]]"#, #"{"a":{"b":{"c":[1,{"d":null}]}}}"#, #"{"k":1,"k":2}"#, "[-1.0e0, 2.5E-1, 9007199254740993]",
    ]

    static let refused = [
        "", " ", "{", "}", "[1,]", "[,1]", "{\"a\":1,}", "{a:1}", "{'a':1}", "01", "-", "1.", ".5", "1e", "1e+", "+1",
        "NaN", "Infinity", "tru", "nul", "[1 2]", "{\"a\" 1}", "\"abc", "\"\\x\"", "\"\\u12\"", "\"\\ud800\"",
        "\"\\udc00\"", "\"\\ud800\\u0041\"", "\"a\tb\"", "[1]x", "1 2", "// c\n1", "[1e999]", "-1e400", "\u{FEFF}1",
    ]

    @Test func acceptsWhatTheGrammarAllowsLikeFoundation() throws {
        for text in Self.accepted {
            let bytes = Array(text.utf8)
            let ours = try #require(try? JSONReader.parse(bytes), "refused: \(text)")
            #expect(ours == Self.reference(bytes), "differs from Foundation: \(text)")
        }
    }

    @Test func refusesWhatTheGrammarForbidsWithAnOffset() {
        for text in Self.refused {
            do {
                _ = try JSONReader.parse(Array(text.utf8))
                Issue.record("accepted: \(text.debugDescription)")
            } catch {
                #expect(error.offset >= 0 && error.offset <= text.utf8.count)
                #expect(!error.message.isEmpty)
            }
        }
        // Bytes that are not UTF-8 inside a string.
        #expect(throws: JSONReader.Failure.self) { try JSONReader.parse([0x22, 0xFF, 0xFE, 0x22]) }
    }

    @Test func nestingIsBounded() throws {
        let levels = JSONReader.maxDepth
        let fine = String(repeating: "[", count: levels) + String(repeating: "]", count: levels)
        #expect(throws: Never.self) { try JSONReader.parse(Array(fine.utf8)) }
        let deep = String(repeating: "[", count: 100_000)
        #expect(throws: JSONReader.Failure.self) { try JSONReader.parse(Array(deep.utf8)) }
    }

    @Test func serializedValuesReadBackUnchanged() throws {
        var generator = SystemRandomNumberGenerator()
        func make(_ depth: Int) -> Value {
            switch Int.random(in: 0..<(depth > 3 ? 4 : 6), using: &generator) {
            case 0: return .null
            case 1: return .bool(Bool.random(using: &generator))
            case 2:
                return Bool.random(using: &generator)
                    ? .number(Double(Int.random(in: -1_000_000...1_000_000, using: &generator)))
                    : .number(Double.random(in: -1e12...1e12, using: &generator))
            case 3:
                let scalars = (0..<Int.random(in: 0..<12, using: &generator)).map { _ -> Character in
                    let pool: [Character] = ["a", "\"", "\\", "\n", "\u{01}", "é", "中", "😀", "/", " "]
                    return pool.randomElement(using: &generator)!
                }
                return .string(String(scalars))
            case 4: return .array((0..<Int.random(in: 0..<5, using: &generator)).map { _ in make(depth + 1) })
            default:
                var members: [String: Value] = [:]
                for index in 0..<Int.random(in: 0..<5, using: &generator) { members["k\(index)é"] = make(depth + 1) }
                return .object(members)
            }
        }
        for _ in 0..<2_000 {
            let value = make(0)
            let bytes = JSON.serialize(value)
            #expect(try JSONReader.parse(bytes) == value, "round trip of \(String(decoding: bytes, as: UTF8.self))")
        }
    }

    /// Mutated documents: never a crash, and never accepted where Foundation refuses.
    @Test func mutatedDocumentsAreNeverLooserThanFoundation() {
        var generator = SystemRandomNumberGenerator()
        let seeds = Self.accepted.map { Array($0.utf8) }.filter { !$0.isEmpty }
        let alphabet = Array("{}[],:\"\\/-+.eE0123456789 tfnu\u{0}\n".utf8) + [0xC3, 0xA9, 0xFF]
        for _ in 0..<20_000 {
            var bytes = seeds.randomElement(using: &generator)!
            for _ in 0..<Int.random(in: 1...3, using: &generator) {
                let position = Int.random(in: 0...bytes.count, using: &generator)
                switch Int.random(in: 0..<3, using: &generator) {
                case 0 where position < bytes.count: bytes.remove(at: position)
                case 1 where position < bytes.count: bytes[position] = alphabet.randomElement(using: &generator)!
                default: bytes.insert(alphabet.randomElement(using: &generator)!, at: position)
                }
            }
            if let ours = try? JSONReader.parse(bytes) {
                let theirs = Self.reference(bytes)
                #expect(theirs != nil, "accepted what Foundation refuses: \(bytes)")
                if let theirs {
                    #expect(Self.same(ours, theirs), "read differently from Foundation: \(bytes)")
                }
            }
        }
    }
}
