import MicroHTTP
import RunLoopCore

/// Everything runloopd is configured with.
public struct ServiceConfiguration: Sendable {
    /// The HTTP layer's address, threads and bounds.
    public var http = HTTPServerConfiguration()
    /// The engine's bounds.
    public var limits = Limits()
    /// The control plane's bounds.
    public var api = APILimits()
    /// What the explainer records and when it warns.
    public var diagnostics = DiagnosticsOptions()
    /// Requests queued for the control loop and not yet handled; beyond it 503.
    public var maxQueuedRequests = 4096
    /// The dashboard folder served at `/` ("": the dashboard compiled into the binary).
    public var publicDirectory = ""
    /// When set, every `/api` request needs `Authorization: Bearer <token>`
    /// (`/healthz`, `/readyz` and `/metrics` stay open for probes and scrapers).
    public var token: String?
    /// When true, every mutating API call (POST, PUT, PATCH, DELETE) answers 403.
    public var readOnly = false
    /// Extra names the `Host` header may carry (`--allowed-host`; `*` for any).
    public var allowedHosts: [String] = []
    /// Other origins whose pages may call the API (`--allowed-origin`).
    public var allowedOrigins: [String] = []

    /// State-changing requests the journal keeps (`GET /api/journal`); 0 turns it off.
    public var journalSize = 1000
    /// Most bytes of request bodies and answers the journal holds (one
    /// request larger than that is kept alone).
    public var journalBytes = Journal.defaultMaxBytes
    /// Most bytes (request bodies and answers) one `GET /api/journal` page reads.
    public var maxExportBytes = Journal.defaultMaxExportBytes
    /// The folder of experiment files `GET /api/experiments` serves ("": the
    /// experiments compiled into the binary).
    public var experimentsDirectory = ""
    /// A declared setup (`--setup`) `start()` applies before the service is ready.
    public var setup: Setup?

    /// The defaults.
    /// The history store (off unless enabled: the `runloopd` command enables it).
    public var store = StoreOptions()

    public init() {}
}
