/// The security headers every answer carries.
public enum SecurityHeaders {
    /// The dashboard's policy: only its own scripts, styles and connections; no framing.
    public static let dashboardPolicy =
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        + "font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    /// The policy of API and probe answers: nothing may load from them.
    public static let apiPolicy = "default-src 'none'; frame-ancestors 'none'"

    /// Adds the security headers `headers` lacks: the dashboard's policy on
    /// static files (`dashboard`), the API's elsewhere.
    public static func add(to headers: inout [(String, String)], dashboard: Bool) {
        // Bit i set: headers already has names[i]. Compared in place, nothing allocated.
        var present = 0
        for (name, _) in headers {
            for index in lowercasedNames.indices where name.equalsASCIIIgnoringCase(lowercasedNames[index]) {
                present |= 1 << index
            }
        }
        for index in names.indices where present & (1 << index) == 0 {
            headers.append((names[index], index == 0 ? (dashboard ? dashboardPolicy : apiPolicy) : values[index]))
        }
    }

    /// How many headers `add` may add.
    public static var count: Int { names.count }

    private static let names = [
        "Content-Security-Policy", "X-Content-Type-Options", "X-Frame-Options", "Referrer-Policy",
        "Cross-Origin-Resource-Policy",
    ]
    private static let lowercasedNames: [StaticString] = [
        "content-security-policy", "x-content-type-options", "x-frame-options", "referrer-policy",
        "cross-origin-resource-policy",
    ]
    /// The values after the policy (which depends on the answer).
    private static let values = ["", "nosniff", "DENY", "no-referrer", "same-origin"]
}
