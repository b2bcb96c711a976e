import ArgumentParser
import Foundation
import LabPlayer
import MicroHTTP
import RunLoopServer

/// `runloopd healthcheck`: GET /healthz on a running server and exit 0 on 200,
/// 1 otherwise. Needs no curl (the container's HEALTHCHECK uses it).
struct Healthcheck: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "healthcheck",
        abstract: "Exit 0 when a runloopd answers GET /healthz with 200, 1 otherwise.")

    @Option(help: "Address of the server.")
    var host: String = "127.0.0.1"

    @Option(help: "Port of the server.")
    var port = Setting(HTTPServerConfiguration.defaultPort, env: "PORT")

    @Option(help: "Seconds to wait for the answer.")
    var timeout: Double = 3

    mutating func validate() throws { try port.resolve() }

    func run() throws {
        switch Self.probe(host: host, port: port.value, timeout: timeout) {
        case .success(let status) where status == 200:
            print("healthy: GET /healthz answered 200")
        case .success(let status):
            print("unhealthy: GET /healthz answered \(status)")
            throw ExitCode(1)
        case .failure(let reason):
            print("unhealthy: \(reason.message)")
            throw ExitCode(1)
        }
    }

    struct ProbeError: Error {
        let message: String
    }

    /// Sends `GET /healthz` and returns the status code.
    static func probe(host: String, port: UInt16, timeout: Double) -> Result<Int, ProbeError> {
        do throws(LabClient.Failure) {
            return .success(try LabClient(host: host, port: port, timeout: timeout).send("GET", "/healthz").status)
        } catch {
            return .failure(ProbeError(message: error.description))
        }
    }
}
