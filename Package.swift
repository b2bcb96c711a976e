// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "runloopd",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "RunLoopCore", targets: ["RunLoopCore"]),
        .executable(name: "runloopd", targets: ["runloopd"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
    ],
    targets: [
        .target(name: "CLinux"),
        .target(name: "RunLoopCore", dependencies: ["CLinux"], exclude: ["README.md"]),
        .systemLibrary(
            name: "CMicroHTTPD",
            pkgConfig: "libmicrohttpd",
            providers: [.apt(["libmicrohttpd-dev"])]
        ),
        .target(
            name: "RunLoopServer",
            // openapi.json is compiled in as OpenAPISpec.generated.swift (scripts/embed-openapi.sh).
            dependencies: [
                "RunLoopCore",
                "CMicroHTTPD",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            exclude: ["API/openapi.json"]
        ),
        .executableTarget(
            name: "runloopd",
            dependencies: [
                "RunLoopServer",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(name: "RunLoopCoreTests", dependencies: ["RunLoopCore"]),
        .testTarget(
            name: "RunLoopServerTests",
            dependencies: [
                "RunLoopServer", "RunLoopCore",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
