/// A dynamically typed argument or result value (the shape of JSON, without JSON).
public enum Value: Sendable, Hashable {
    /// No value.
    case null
    /// true / false.
    case bool(Bool)
    /// A finite number.
    case number(Double)
    /// Text.
    case string(String)
    /// An ordered list.
    case array([Value])
    /// Named values.
    case object([String: Value])

    /// The number as an exact integer, if it is one.
    public var integer: Int? {
        guard case .number(let d) = self, d.isFinite, d.rounded() == d, abs(d) < 9.0e15 else { return nil }
        return Int(d)
    }

    /// The number, if this is one.
    public var number: Double? {
        if case .number(let d) = self { return d }
        return nil
    }

    /// The text, if this is a string.
    public var string: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    /// The flag, if this is a bool.
    public var bool: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }

    /// The members, if this is an object.
    public var object: [String: Value]? {
        if case .object(let o) = self { return o }
        return nil
    }
}

extension Value: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByDictionaryLiteral, ExpressibleByArrayLiteral, ExpressibleByNilLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .number(Double(value)) }
    public init(floatLiteral value: Double) { self = .number(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(dictionaryLiteral elements: (String, Value)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
    public init(arrayLiteral elements: Value...) { self = .array(elements) }
    public init(nilLiteral: ()) { self = .null }
}
