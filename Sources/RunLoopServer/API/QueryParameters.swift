import RunLoopCore

extension API {
    /// The largest integer a JSON number carries exactly (2^53 - 1): the top
    /// of every id, sequence and run number a query may name.
    static let maxExactInteger = 9_007_199_254_740_991

    /// An integer query parameter within `range`, or nil when absent; any
    /// other text (empty, signed, fractional, out of range) is 400 with
    /// "`name` must be a whole number in `lower`...`upper`".
    static func integerParameter(_ ctx: RouteContext, _ name: String, in range: ClosedRange<Int>)
        throws(RunLoopError) -> Int?
    {
        guard let text = ctx.request.query[name] else { return nil }
        guard let value = Int(text), range.contains(value) else {
            throw .badValue(name, "\(name) must be a whole number in \(range.lowerBound)...\(range.upperBound)")
        }
        return value
    }
}
