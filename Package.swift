// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "runloopd",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "RunLoopCore", targets: ["RunLoopCore"]),
        .executable(name: "runloopd", targets: ["runloopd"]),
        // The HTTP client, event-stream reader, process launcher and waits shared
        // by the tests and the benchmarks package (never linked into runloopd).
        .library(name: "RunLoopTestSupport", targets: ["RunLoopTestSupport"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.6.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
    ],
    targets: [
        // The commit `runloopd --version` names: RUNLOOPD_COMMIT in the build's
        // environment (`make release` sets it from git), else "unknown".
        .target(name: "CLinux", cSettings: [.define("RUNLOOPD_COMMIT", to: "\"\(buildCommit)\"")]),
        // The API's words (error, warning and exit-cause codes): no dependencies, so
        // embed-files links them to write openapi.json's enums at build time.
        .target(name: "APIWords"),
        .target(
            name: "Primitives", dependencies: ["APIWords", .product(name: "HeapModule", package: "swift-collections")]),
        // The model of CF: the predictor over a loop's snapshot (`LoopModel`) and the
        // value types it speaks in. No Foundation, no CoreFoundation: it cannot call CF
        // (scripts/model-imports.py, in `make lint`, holds its imports to a short list).
        .target(name: "RunLoopModel", dependencies: ["Primitives"]),
        .target(
            name: "RunLoopCore",
            dependencies: [
                "CLinux", "Primitives", "RunLoopModel", .product(name: "DequeModule", package: "swift-collections"),
            ],
            exclude: ["README.md"]
        ),
        .systemLibrary(
            name: "CMicroHTTPD",
            pkgConfig: "libmicrohttpd",
            providers: [.apt(["libmicrohttpd-dev"])]
        ),
        .target(
            name: "MicroHTTP",
            dependencies: ["CMicroHTTPD", "Primitives", .product(name: "Logging", package: "swift-log")]
        ),
        // libpq, PostgreSQL's own C client (issue 27: it replaced postgres-nio,
        // whose SwiftNIO, swift-crypto and BoringSSL were ~900 of 2,091 debug
        // compile steps, for a store called only with blocking calls).
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        // The history store (issue 15): SQLite through GRDB, PostgreSQL through
        // libpq, behind one protocol; only RunLoopServer links it.
        .target(
            name: "RunLoopStore",
            dependencies: [
                "CLibPQ",
                "Primitives",
                .product(name: "GRDB", package: "GRDB.swift"),
                // SQLite's C API, for the writer's inserts (one prepared statement, bound by hand).
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "RunLoopServer",
            dependencies: [
                "CLinux",
                "Primitives",
                "RunLoopCore",
                "MicroHTTP",
                "CMicroHTTPD",
                "RunLoopStore",
                .product(name: "Logging", package: "swift-log"),
            ],
            exclude: ["API/openapi.json"],
            // openapi.json, Public/ and experiments/ are compiled in at build time (Plugins/EmbedFiles).
            plugins: ["EmbedFiles"]
        ),
        // runloopd's one HTTP client: `runloopd play`/`healthcheck`, the tests and the benchmarks.
        .target(name: "RunloopdClient"),
        // The experiment player (`runloopd play`) and its client over RunloopdClient.
        .target(name: "LabPlayer", dependencies: ["RunloopdClient", "RunLoopServer", "RunLoopCore", "Primitives"]),
        .executableTarget(name: "embed-files", dependencies: ["APIWords"]),
        .plugin(name: "EmbedFiles", capability: .buildTool(), dependencies: ["embed-files"]),
        .executableTarget(
            name: "runloopd",
            dependencies: [
                "RunLoopServer",
                "LabPlayer",
                "RunLoopStore",
                "MicroHTTP",
                "Primitives",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(name: "RunLoopTestSupport", dependencies: ["Primitives", "RunloopdClient"]),
        // The plain-CF oracle of the predict differential (issue 38): Foundation
        // and CoreFoundation only, none of runloopd's code; `cf-oracle` asks it
        // from the command line (JSON lines in, JSON lines out).
        .target(name: "CFOracle"),
        .executableTarget(name: "cf-oracle", dependencies: ["CFOracle"]),
        .testTarget(
            name: "RunLoopCoreTests",
            dependencies: ["RunLoopCore", "RunLoopModel", "Primitives", "RunLoopTestSupport", "CFOracle"],
            // Seeds of the predict differential test that ever failed, replayed every run.
            exclude: ["predict-failed-seeds.txt"]),
        // runloopd's own options: parsed in process, no server started.
        .testTarget(
            name: "RunLoopdTests",
            dependencies: [
                "runloopd", "RunLoopCore", "RunLoopServer",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .testTarget(
            name: "RunLoopServerTests",
            dependencies: [
                "RunLoopServer", "RunLoopCore", "Primitives", "MicroHTTP", "RunLoopTestSupport", "CLinux", "LabPlayer",
                "RunLoopStore", "CLibPQ",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)

/// RUNLOOPD_COMMIT of the build's environment, as `runloopd --version` prints it (hex digits and
/// `-dirty` only), or "unknown".
var buildCommit: String {
    let given = Context.environment["RUNLOOPD_COMMIT"] ?? ""
    let allowed = given.allSatisfy { $0.isHexDigit || "-dirty".contains($0) }
    return !given.isEmpty && allowed ? given : "unknown"
}
