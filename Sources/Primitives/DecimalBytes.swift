extension [UInt8] {
    /// Appends `value` (negative counts as 0) in decimal, zero-padded to at
    /// least `digits` digits: the one number writer of the byte-level formats
    /// (timestamps, access-log lines, peer addresses).
    public mutating func appendDecimal(_ value: Int, digits: Int = 1) {
        let value = Swift.max(0, value)
        var divisor = 1
        var count = 1
        while count < digits || divisor <= value / 10 {
            divisor *= 10
            count += 1
        }
        while divisor > 0 {
            append(UInt8(48 + value / divisor % 10))
            divisor /= 10
        }
    }
}
