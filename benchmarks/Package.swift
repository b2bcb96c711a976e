// swift-tools-version:6.1
// The benchmarks of issue 6, as their own package so `make test` never builds
// them. It uses the root package's `RunLoopCore` library product; the HTTP
// benchmarks drive the real `runloopd` binary (built from the root package)
// through `RunLoopTestSupport`'s client and launcher, the tests' own.
import Foundation
import PackageDescription

// SwiftPM names a path dependency after its folder: find that name rather
// than assume the clone is called `runloopd`.
let rootPath = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
let rootIdentity = rootPath.lastPathComponent

let package = Package(
    name: "runloopd-benchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(path: "..")
    ],
    targets: [
        .target(name: "CBench"),
        .executableTarget(
            name: "rlbench",
            dependencies: [
                .product(name: "RunLoopCore", package: rootIdentity),
                .product(name: "RunLoopTestSupport", package: rootIdentity),
                "CBench",
            ]
        ),
    ],
    // Swift 5 mode: benchmark code shares raw CF objects between threads on purpose.
    swiftLanguageModes: [.v5]
)
