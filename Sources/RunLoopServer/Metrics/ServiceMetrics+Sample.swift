import MicroHTTP
import RunLoopCore

extension ServiceMetrics {
    /// What a scrape samples at the moment it is answered.
    struct Sample {
        var threads: [WorkerSnapshot] = []
        var utilizations: [Double] = []
        var warningsActive: [String: Int] = [:]
        var queued = 0
        var eventClients = 0
        /// Event-stream clients dropped for reading too slowly (`--event-stream-buffer`), since start.
        var eventClientsDropped = 0
        /// The HTTP layer's connections and what its budgets closed (nil before it starts).
        var connections: HTTPConnectionCounts?
        /// The build: `version` and the store kind.
        var version = ""
        var storeKind = "none"
        /// The history store's figures; nil without a store.
        var store: HistoryRecorder.Status?
        /// Instances of the fleet by health, as last read from the store; nil
        /// without a store or before its first answer.
        var fleet: [String: Int]?
        /// Nested runs refused since start, by reason; livelocks detected.
        var nestedRunsRefused: [String: Int] = [:]
        var livelocks = 0
        /// The depth budget (`--max-nesting`).
        var maxNesting = 0
        /// The predictor's item-steps spent for requests; predictions given up.
        var predictSteps = 0
        var predictionsGivenUp = 0
        /// Requests queued or running on each offload queue (`predict`, `export`).
        var offloadQueued: [(String, Int)] = []
        /// What the journal holds, and its byte budget (`--journal-bytes`).
        var journal = Journal.Usage()
        var journalLimit = 0
    }
}
