// swift-tools-version: 6.0
import PackageDescription

// The targets form a chain; each may import only what its `dependencies` list (docs/architecture.md):
//
//   ProtFSSystem  the syscall layer: the only target that imports the C shims
//   ProtFS        the model: classes, device layout, lock state, the walker and the class resolver
//   ProtFSLock, ProtFSCache, ProtFSDownloads, ProtFSAudit, ProtFSBackup, ProtFSAppBundle
//                 features, each on the model only
//   ProtFSFoundation   the Foundation-shaped API (FileManager, FileHandle, URLSession)
//   ProtFSApp     the app lifecycle: the supervisor of `protfs app launch`, its socket protocol
//   ProtFSSessions  background sessions out of process: the session service and its client
//   ProtFSLaunch  running apps: the launch plan, the launcher, prewarming, the confined spawn
//   ProtFSKit     the UIKit-shaped API of Swift apps (UIApplication, URLSession, FileManager), on
//                 ProtFSApp and ProtFSSessions, and CommonCrypto's digests on CCrypto; Examples/ use it
//   ProtFSCLI     the command line (parser, help, commands), a library so tests run it in-process
//   protfs        the executable: it only starts ProtFSCLI
let package = Package(
  name: "protfs",
  // The API reference (scripts/docs.sh, docs/api-reference.md) documents every target of the
  // library products: a target added here goes into the script's `layers` too (APIReferenceTests
  // fails until it does).
  products: [
    .library(
      name: "ProtFS",
      targets: [
        "ProtFSSystem", "ProtFS", "ProtFSLock", "ProtFSCache", "ProtFSDownloads", "ProtFSAudit", "ProtFSFoundation",
        "ProtFSApp", "ProtFSLaunch",
      ]),
    .library(name: "ProtFSKit", targets: ["ProtFSKit"]),
    .executable(name: "protfs", targets: ["protfs"]),
  ],
  targets: [
    // Debian C libraries, reached through system-library targets.
    .systemLibrary(name: "CAttr", providers: [.apt(["libattr1-dev"])]),
    // libcurl is loaded with dlopen when the first transfer starts (Sources/CCurl/include/CCurl.h);
    // libcurl4-openssl-dev (scripts/setup.sh) gives its header.
    .target(name: "CCurl"),
    .systemLibrary(name: "CSQLite", providers: [.apt(["libsqlite3-dev"])]),
    // libcrypto is loaded with dlopen when first used (Sources/CCrypto/include/CCrypto.h);
    // libssl-dev (scripts/setup.sh) gives its headers.
    .target(name: "CCrypto"),
    // libzip is loaded with dlopen when the first .ipa is read (Sources/CZip/include/CZip.h);
    // libzip-dev (scripts/setup.sh) gives its header.
    .target(name: "CZip"),
    .systemLibrary(name: "CFuse3", pkgConfig: "fuse3", providers: [.apt(["libfuse3-dev"])]),
    // Thin wrappers for syscalls Swift cannot call directly (variadic syscall(2), prctl(2)).
    .target(name: "CProtFSSys"),
    // The protfs program's fast way into a prewarmed app: a constructor, linked into protfs alone.
    .target(name: "CProtFSLaunch"),
    .target(name: "ProtFSSystem", dependencies: ["CAttr", "CProtFSSys"]),
    .target(name: "ProtFS", dependencies: ["ProtFSSystem", "CCrypto"]),
    .target(name: "ProtFSLock", dependencies: ["ProtFSSystem", "ProtFS", "ProtFSSeal", "CCrypto"]),
    .target(name: "ProtFSCache", dependencies: ["ProtFSSystem", "ProtFS"]),
    .target(
      name: "ProtFSDownloads", dependencies: ["ProtFSSystem", "ProtFS", "ProtFSSeal", "CCurl", "CSQLite", "CCrypto"]),
    .target(name: "ProtFSAudit", dependencies: ["ProtFSSystem", "ProtFS", "ProtFSSeal"]),
    .target(name: "ProtFSFoundation", dependencies: ["ProtFSSystem", "ProtFS", "ProtFSSeal"]),
    .target(name: "ProtFSApp", dependencies: ["ProtFSSystem", "ProtFS"]),
    // The UIKit-shaped API of Swift apps run by `protfs app launch` (UIApplication and its delegate),
    // with CommonCrypto's digests on libcrypto (CCrypto).
    // Background sessions (docs/semantics.md §9): the session service that owns transfers out of
    // process, its client, and the backend protocol ProtFSKit's URLSession is written against.
    .target(name: "ProtFSSessions", dependencies: ["ProtFSSystem", "ProtFS", "ProtFSDownloads", "ProtFSApp"]),
    .target(
      name: "ProtFSKit",
      dependencies: [
        "ProtFSSystem", "ProtFS", "ProtFSDownloads", "ProtFSApp", "ProtFSSessions", "ProtFSFoundation", "CCrypto",
      ]),
    // Example apps (the source documents' background logic in Swift), run by the end-to-end tests.
    .executableTarget(name: "BackgroundRunner", dependencies: ["ProtFSKit"], path: "Examples/BackgroundRunner"),
    .executableTarget(name: "FetchHelper", dependencies: ["ProtFSKit"], path: "Examples/FetchHelper"),
    .executableTarget(name: "ForgetfulApp", dependencies: ["ProtFSKit"], path: "Examples/ForgetfulApp"),
    // The source documents' URLSession classes (issue 14), built by the tests.
    .executableTarget(name: "BackgroundDownloader", dependencies: ["ProtFSKit"], path: "Examples/BackgroundDownloader"),
    .executableTarget(name: "UploadSession", dependencies: ["ProtFSKit"], path: "Examples/UploadSession"),
    .executableTarget(name: "FetchDownloader", dependencies: ["ProtFSKit"], path: "Examples/FetchDownloader"),
    .executableTarget(name: "PauseResume", dependencies: ["ProtFSKit"], path: "Examples/PauseResume"),
    // iOS app delegates ported by their imports alone (issue 27): UIApplicationMain in the Swift 5
    // language mode, and an `@main` delegate in the Swift 6 mode.
    .executableTarget(
      name: "PortedApp", dependencies: ["ProtFSKit"], path: "Examples/PortedApp",
      swiftSettings: [.swiftLanguageMode(.v5)]),
    .executableTarget(name: "PortedMainApp", dependencies: ["ProtFSKit"], path: "Examples/PortedMainApp"),
    // An app delegate that inherits from NSObject, as code before Xcode's UIResponder template
    // declares it, started by UIApplicationMain (issue 62; Swift 5 mode).
    .executableTarget(
      name: "LegacyDelegate", dependencies: ["ProtFSKit"], path: "Examples/LegacyDelegate",
      swiftSettings: [.swiftLanguageMode(.v5)]),
    // Background fetch with URLSession.shared, as Apple's documentation writes it (Swift 5 mode).
    .executableTarget(
      name: "SharedSessionFetch", dependencies: ["ProtFSKit"], path: "Examples/SharedSessionFetch",
      swiftSettings: [.swiftLanguageMode(.v5)]),
    // Networking code as iOS apps write it: challenges, cookies, progress, lines, becomeDownload.
    .executableTarget(
      name: "NetworkClient", dependencies: ["ProtFSKit"], path: "Examples/NetworkClient",
      swiftSettings: [.swiftLanguageMode(.v5)]),
    // Xcode's UIKit app template: an @main app delegate and a scene delegate (Swift 5 mode).
    .executableTarget(
      name: "SceneApp", dependencies: ["ProtFSKit"], path: "Examples/SceneApp",
      swiftSettings: [.swiftLanguageMode(.v5)]),
    // A download manager as open-source iOS ones are written: its own resume data, Apple's keys,
    // the task's response archived (issue 62). Swift 5 mode, as such libraries are.
    .executableTarget(
      name: "DownloadManager", dependencies: ["ProtFSKit"], path: "Examples/DownloadManager",
      swiftSettings: [.swiftLanguageMode(.v5)]),
    // A silent push that starts a background download (issue 32).
    .executableTarget(name: "PushDownloader", dependencies: ["ProtFSKit"], path: "Examples/PushDownloader"),
    // Audio and location keeping an app running in the background (issue 32).
    .executableTarget(name: "KeepAlive", dependencies: ["ProtFSKit"], path: "Examples/KeepAlive"),
    // BGTaskScheduler as Apple's sample uses it, in the Swift 5 language mode (issue 32).
    .executableTarget(
      name: "TaskScheduler", dependencies: ["ProtFSKit"], path: "Examples/TaskScheduler",
      swiftSettings: [.swiftLanguageMode(.v5)]),
    // A background session asked for a data or stream upload, which iOS answers with an exception.
    .executableTarget(name: "MisusedUpload", dependencies: ["ProtFSKit"], path: "Examples/MisusedUpload"),
    // An app that crashes in each of the ways iOS reports, for its crash report (issue 62).
    .executableTarget(name: "CrashingApp", dependencies: ["ProtFSKit"], path: "Examples/CrashingApp"),
    // iOS backups turned into containers (`protfs import-backup`): Manifest.db through SQLite, the
    // contents' digests through libcrypto.
    .target(name: "ProtFSBackup", dependencies: ["ProtFSSystem", "ProtFS", "ProtFSSeal", "CSQLite", "CCrypto"]),
    // Reading a real app (`protfs inspect`, `--from-app`): an .ipa through libzip, or an .app
    // directory, its Info.plist and its executable's code signature.
    .target(name: "ProtFSAppBundle", dependencies: ["ProtFSSystem", "ProtFS", "CZip"]),
    // Sealed devices (issue 66): the keybag, per-file keys wrapped by class keys, the contents cipher.
    .target(name: "ProtFSSeal", dependencies: ["ProtFSSystem", "ProtFS", "CCrypto"]),
    // The device mount: libfuse3's low-level API, used by no other target.
    .target(name: "ProtFSMount", dependencies: ["ProtFSSystem", "ProtFS", "ProtFSSeal", "CFuse3"]),
    // Running apps (docs/architecture.md): a launch as a plan, the launcher, the prewarm server and
    // client, the one confined spawn that exec, every launch and the system's relaunches go through.
    .target(
      name: "ProtFSLaunch",
      dependencies: ["ProtFSSystem", "ProtFS", "ProtFSLock", "ProtFSApp", "ProtFSMount", "ProtFSSessions"]),
    // What the machine gives protfs (`protfs doctor`): FUSE, xattrs, the cgroup freezer, the app
    // user's access, TIOCSTI, the kernel calls protfs prefers; the apps' cgroups are ProtFSApp's.
    .target(name: "ProtFSDoctor", dependencies: ["ProtFSSystem", "ProtFS", "ProtFSApp"]),
    // The command-line layer (parser, help, commands), a library so tests can run it in-process.
    .target(
      name: "ProtFSCLI",
      dependencies: [
        "ProtFSSystem", "ProtFS", "ProtFSLock", "ProtFSCache", "ProtFSDownloads", "ProtFSAudit", "ProtFSMount",
        "ProtFSApp", "ProtFSSessions", "ProtFSBackup", "ProtFSLaunch", "ProtFSAppBundle", "ProtFSDoctor",
      ]),
    // Linked as a position-dependent executable in release builds: the loader then has none of
    // the some 80,000 relocations of a position-independent one to apply at every start.
    .executableTarget(
      name: "protfs", dependencies: ["ProtFSCLI", "CProtFSLaunch"],
      linkerSettings: [.unsafeFlags(["-Xclang-linker", "-no-pie"], .when(configuration: .release))]),
    .target(
      name: "ProtFSTestSupport",
      dependencies: ["ProtFSSystem", "ProtFS", "ProtFSDownloads", "ProtFSAudit", "CAttr"],
      path: "Tests/ProtFSTestSupport"),
    // Drives the download engine without the CLI, for the engine's kill -9 tests and benchmark.
    .executableTarget(
      name: "protfs-fetch", dependencies: ["ProtFSSystem", "ProtFS", "ProtFSDownloads"], path: "Tests/ProtFSFetch"),
    .testTarget(
      name: "ProtFSTests",
      dependencies: [
        "ProtFSSystem", "ProtFS", "ProtFSLock", "ProtFSCache", "ProtFSDownloads", "ProtFSAudit", "ProtFSFoundation",
        "ProtFSMount", "ProtFSApp", "ProtFSSessions", "ProtFSBackup", "ProtFSAppBundle", "ProtFSSeal", "ProtFSDoctor",
        "ProtFSLaunch",
        "ProtFSTestSupport", "CAttr",
      ]),
    // ProtFSKit's URLSession against a fake backend, and its FileManager.
    .testTarget(
      name: "ProtFSKitTests",
      dependencies: ["ProtFSKit", "ProtFSDownloads", "ProtFSSessions", "ProtFSSystem", "ProtFSTestSupport"]),
    // The parser, help and exit statuses, in-process.
    .testTarget(
      name: "ProtFSCLITests",
      dependencies: [
        "ProtFSCLI", "ProtFSSystem", "ProtFS", "ProtFSLock", "ProtFSMount", "ProtFSDownloads", "ProtFSSessions",
        "ProtFSLaunch", "CProtFSLaunch",
      ]),
    // Depends on the executables so that `swift test` builds the binaries the tests run.
    .testTarget(
      name: "ProtFSEndToEndTests",
      dependencies: [
        "ProtFSSystem", "ProtFS", "ProtFSLock", "ProtFSDownloads", "ProtFSTestSupport", "protfs",
        "ProtFSApp", "ProtFSSessions", "ProtFSCLI", "ProtFSSeal", "ProtFSLaunch",
        "BackgroundRunner", "FetchHelper", "ForgetfulApp", "BackgroundDownloader", "UploadSession", "FetchDownloader",
        "PauseResume", "PortedApp", "PortedMainApp", "MisusedUpload", "NetworkClient", "SceneApp", "LegacyDelegate",
        "CrashingApp", "DownloadManager",
      ]
    ),
  ]
)
