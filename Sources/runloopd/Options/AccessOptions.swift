import ArgumentParser
import Foundation
import RunLoopServer

/// Who may use the API: the token, the open mode, the names and origins
/// allowed, read-only.
struct AccessOptions: ParsableArguments {
    @Option(
        help: "Require Authorization: Bearer <token> on every /api request (prefer RUNLOOPD_TOKEN or --token-file).")
    var token = Setting("", env: "TOKEN")

    @Option(
        help:
            "Read the token from this file (a mounted Docker or Kubernetes secret); surrounding whitespace is ignored.")
    var tokenFile = Setting("", env: "TOKEN_FILE")

    @Flag(
        help:
            "Allow serving the API without a token on a non-loopback address (anyone who can connect controls it; env RUNLOOPD_NO_AUTH=1)."
    )
    var noAuth = false

    @Option(
        help: ArgumentHelp(
            "Another name the Host header may carry (repeatable; '*' turns the DNS-rebinding check off).",
            discussion:
                "localhost, 127.0.0.1, [::1] and the bound address are always allowed. RUNLOOPD_ALLOWED_HOST takes a comma-separated list."
        ))
    var allowedHost: [String] = []

    @Option(
        help: ArgumentHelp(
            "Another origin whose pages may change state, e.g. https://dash.example:8443 (repeatable).",
            discussion: "RUNLOOPD_ALLOWED_ORIGIN takes a comma-separated list."))
    var allowedOrigin: [String] = []

    @Flag(help: "Refuse every mutating API call with 403 (env RUNLOOPD_READ_ONLY=1).")
    var readOnly = false

    /// The shortest token accepted: a short one is guessed by anyone who can connect.
    static let minimumTokenLength = 16

    mutating func validate() throws {
        let environment = Environment.current
        try resolve(\.token, \.tokenFile)
        if !noAuth { noAuth = try environment.toggle("NO_AUTH") ?? false }
        if !readOnly { readOnly = try environment.toggle("READ_ONLY") ?? false }
        if allowedHost.isEmpty { allowedHost = environment.list("ALLOWED_HOST") }
        if allowedOrigin.isEmpty { allowedOrigin = environment.list("ALLOWED_ORIGIN") }
        guard token.value.isEmpty || tokenFile.value.isEmpty else {
            throw ValidationError("give the token once: --token (RUNLOOPD_TOKEN) or --token-file (RUNLOOPD_TOKEN_FILE)")
        }
        guard !noAuth || (token.value.isEmpty && tokenFile.value.isEmpty) else {
            throw ValidationError("--no-auth contradicts the token given with --token or --token-file")
        }
        if !token.value.isEmpty, token.value.count < Self.minimumTokenLength {
            throw ValidationError(Self.shortToken("--token (RUNLOOPD_TOKEN)"))
        }
    }

    /// The token from `--token` or `--token-file` (nil when neither is given);
    /// the file is read at each call (at start and on SIGHUP).
    func resolvedToken() throws(ValidationError) -> String? {
        if !token.value.isEmpty { return token.value }
        let path = tokenFile.value
        guard !path.isEmpty else { return nil }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ValidationError("cannot read --token-file \(path)")
        }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty else { throw ValidationError("--token-file \(path) is empty") }
        guard text.count >= Self.minimumTokenLength else {
            throw ValidationError(Self.shortToken("the token in --token-file \(path)"))
        }
        return text
    }

    static func shortToken(_ what: String) -> String {
        "\(what) is shorter than \(minimumTokenLength) characters: a short token is easy to guess; "
            + "make one with: head -c 24 /dev/urandom | base64"
    }

    /// The access part of the configuration (the token is the caller's: it is read from a file at start).
    func apply(to config: inout ServiceConfiguration) {
        config.readOnly = readOnly
        config.allowedHosts = allowedHost
        config.allowedOrigins = allowedOrigin
    }
}
