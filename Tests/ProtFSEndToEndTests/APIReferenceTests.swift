import Foundation
import ProtFSTestSupport
import Testing

/// `scripts/docs.sh`: the API reference of the library products, made by the toolchain's docc from
/// the modules of the build these tests run from (so it builds nothing), without a warning.
@Suite(.timeLimit(.minutes(3))) struct APIReferenceTests {
  static let root = RepositoryLayout.packageRoot

  /// The modules the reference documents: the targets of Package.swift's library products, read
  /// from the manifest, so that a target added to a product and not to the script fails here.
  static let modules: Set<String> = {
    let manifest = (try? String(contentsOfFile: root + "/Package.swift", encoding: .utf8)) ?? ""
    guard let start = manifest.firstRange(of: "products: ["),
      let end = manifest[start.upperBound...].firstRange(of: "\n  ],")
    else { return [] }
    var names: Set<String> = []
    for list in manifest[start.upperBound..<end.lowerBound].matches(of: /\.library\([^)]*targets: \[([^\]]*)\]/) {
      for name in list.1.matches(of: /"(\w+)"/) { names.insert(String(name.1)) }
    }
    return names
  }()

  /// The build directory of this test bundle (`.build/<triple>/debug`), where the modules are.
  static let buildDirectory: String = {
    let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? ""
    var directory = URL(fileURLWithPath: exe).deletingLastPathComponent()
    for _ in 0..<4 {
      if FileManager.default.fileExists(atPath: directory.path + "/Modules/ProtFSKit.swiftmodule") {
        return directory.path
      }
      directory.deleteLastPathComponent()
    }
    return root + "/.build/debug"
  }()

  /// Runs the docs script `script` (the repository's, or a copy's) into `output`.
  static func docs(_ script: String, output: String) async throws -> RunResult {
    try await Protfs.runProgram("/bin/bash", [script, "--output", output, "--bin-path", buildDirectory])
  }

  /// The JSON of the page at `path` (`documentation/protfskit/uiapplication`) in `archive`.
  static func page(_ path: String, in archive: String) throws -> [String: Any] {
    let data = try Data(contentsOf: URL(fileURLWithPath: archive + "/data/" + path + ".json"))
    return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
  }

  @Test func theReferenceBuildsWithoutAWarningWithAPagePerModuleAndPerProtFSKitType() async throws {
    let scratch = try TestDevice.makeTemporaryDirectory(prefix: "protfs-docs")
    defer { TestDevice.removeTree(scratch) }
    let archive = scratch + "/reference"
    let built = try await Self.docs(Self.root + "/scripts/docs.sh", output: archive)
    #expect(built.status == 0, "\(built)")
    #expect(!(built.stdout + built.stderr).localizedCaseInsensitiveContains("warning"), "\(built)")
    #expect(built.stdout.contains("written to \(archive)"), "\(built)")

    // Static hosting: an HTML page in every page's directory, and a landing page of all modules.
    #expect(Self.modules.count == 10 && Self.modules.contains("ProtFSKit"), "\(Self.modules)")
    let landing = try Self.page("documentation", in: archive)
    let references = (landing["references"] as? [String: Any] ?? [:]).keys
    let listed = Set(references.compactMap { $0.split(separator: "/").last.map(String.init) })
    #expect(listed == Self.modules, "the landing page lists \(listed.sorted())")
    #expect(FileManager.default.fileExists(atPath: archive + "/documentation/index.html"))
    for module in Self.modules {
      let path = "documentation/" + module.lowercased()
      #expect(FileManager.default.fileExists(atPath: archive + "/" + path + "/index.html"), "\(module)")
      #expect(try Self.page(path, in: archive)["kind"] as? String == "symbol", "\(module)")
    }

    // ProtFSKit's page is its catalog's (topic groups for iOS developers); UIApplication has its own.
    let kit = try Self.page("documentation/protfskit", in: archive)
    let topics = (kit["topicSections"] as? [[String: Any]] ?? []).compactMap { $0["title"] as? String }
    #expect(topics.starts(with: ["The app", "Background sessions", "Session delegates"]), "\(topics)")
    #expect(FileManager.default.fileExists(atPath: archive + "/documentation/protfskit/uiapplication/index.html"))
    let application = try Self.page("documentation/protfskit/uiapplication", in: archive)
    let title = (application["metadata"] as? [String: Any])?["title"] as? String
    let abstract = (application["abstract"] as? [[String: Any]] ?? []).compactMap { $0["text"] as? String }
    #expect(title == "UIApplication" && abstract.joined().hasPrefix("The running app"), "\(application)")
    #expect(
      FileManager.default.fileExists(atPath: archive + "/documentation/protfskit/urlsession/index.html")
        && FileManager.default.fileExists(atPath: archive + "/documentation/protfs/protectionclass/index.html"))
  }

  @Test func aLinkToNoSymbolFailsTheBuildAndLeavesNoArchive() async throws {
    // A copy of the repository's script and sources, whose first module's catalog links to nothing.
    let scratch = try TestDevice.makeTemporaryDirectory(prefix: "protfs-docs")
    defer { TestDevice.removeTree(scratch) }
    let copy = scratch + "/repository"
    try FileManager.default.createDirectory(atPath: copy + "/scripts", withIntermediateDirectories: true)
    try FileManager.default.copyItem(atPath: Self.root + "/scripts/docs.sh", toPath: copy + "/scripts/docs.sh")
    try FileManager.default.copyItem(atPath: Self.root + "/Sources", toPath: copy + "/Sources")
    let catalog = copy + "/Sources/ProtFSSystem/ProtFSSystem.docc/ProtFSSystem.md"
    let text = try String(contentsOfFile: catalog, encoding: .utf8)
    try (text + "\nSee ``NoSuchSymbol``.\n").write(toFile: catalog, atomically: true, encoding: .utf8)

    let archive = scratch + "/reference"
    let built = try await Self.docs(copy + "/scripts/docs.sh", output: archive)
    #expect(built.status == 1, "\(built)")
    #expect(built.stderr.contains("'NoSuchSymbol' doesn't exist"), "\(built)")
    #expect(built.stderr.contains("must build without a warning"), "\(built)")
    #expect(!FileManager.default.fileExists(atPath: archive), "\(built)")
  }
}
