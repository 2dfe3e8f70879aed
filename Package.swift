// swift-tools-version: 6.0
import PackageDescription

let package = Package(
  name: "protfs",
  products: [
    .library(name: "ProtFS", targets: ["ProtFS"]),
    .executable(name: "protfs", targets: ["protfs"]),
  ],
  targets: [
    // Debian C libraries, reached through system-library targets.
    .systemLibrary(name: "CAttr", providers: [.apt(["libattr1-dev"])]),
    .systemLibrary(name: "CCurl", providers: [.apt(["libcurl4-openssl-dev"])]),
    .systemLibrary(name: "CSQLite", providers: [.apt(["libsqlite3-dev"])]),
    .systemLibrary(name: "CCrypto", providers: [.apt(["libssl-dev"])]),
    // Thin wrappers for syscalls Swift cannot call directly (variadic syscall(2), prctl(2)).
    .target(name: "CProtFSSys"),
    .target(
      name: "ProtFS",
      dependencies: ["CAttr", "CProtFSSys", "CCurl", "CSQLite", "CCrypto"]
    ),
    // The command-line layer (parser, help, commands), a library so tests can run it in-process.
    .target(name: "ProtFSCLI", dependencies: ["ProtFS"]),
    .executableTarget(name: "protfs", dependencies: ["ProtFSCLI"]),
    .target(name: "ProtFSTestSupport", dependencies: ["ProtFS", "CAttr"], path: "Tests/ProtFSTestSupport"),
    // Drives the download engine without the CLI, for the engine's kill -9 tests and benchmark.
    .executableTarget(name: "protfs-fetch", dependencies: ["ProtFS"], path: "Tests/ProtFSFetch"),
    .testTarget(name: "ProtFSTests", dependencies: ["ProtFS", "ProtFSTestSupport", "CAttr"]),
    // The parser, help and exit statuses, in-process.
    .testTarget(name: "ProtFSCLITests", dependencies: ["ProtFSCLI", "ProtFS"]),
    // Depends on the executable so that `swift test` builds the binary the tests run.
    .testTarget(
      name: "ProtFSEndToEndTests",
      dependencies: ["ProtFS", "ProtFSTestSupport", "protfs"]
    ),
  ]
)
