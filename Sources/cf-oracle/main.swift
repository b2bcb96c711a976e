import CFOracle
import Foundation

// cf-oracle: reads one OracleSetup as JSON per line on standard input, plays
// each on plain CoreFoundation, and prints one OracleResult as JSON per line.
// The predict differential links CFOracle directly; this is the same oracle
// for a person (or another implementation) to ask.
while let line = readLine() {
    guard !line.trimmingCharacters(in: .whitespaces).isEmpty else { continue }
    do {
        let out = try CFOracle.play(json: Data(line.utf8))
        print(String(decoding: out, as: UTF8.self))
    } catch {
        print("{\"error\":\"\(error)\"}")
    }
}
