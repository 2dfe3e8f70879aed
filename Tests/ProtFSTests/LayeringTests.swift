import Foundation
import ProtFSTestSupport
import Testing

/// The targets form a chain, and each source file imports only what its target may
/// (docs/architecture.md). SwiftPM alone does not enforce this: a module built in the same
/// directory can be imported without being a declared dependency, so this test reads every `import`.
@Suite("Layering")
struct LayeringTests {
  /// The system and toolchain modules any target may import.
  static let toolchain: Set<String> = ["Foundation", "FoundationNetworking", "Glibc", "Dispatch", "Synchronization"]

  /// What each source target may import besides the toolchain: the `dependencies` Package.swift
  /// gives it, read from Package.swift itself, so that the manifest is the one statement of the
  /// layers (both directions are checked: a target imports nothing it does not list, and lists
  /// nothing it does not import).
  static let allowed: [String: Set<String>] = {
    let manifest = (try? String(contentsOfFile: RepositoryLayout.packageRoot + "/Package.swift", encoding: .utf8)) ?? ""
    let sources = Set(
      (try? FileManager.default.contentsOfDirectory(atPath: RepositoryLayout.packageRoot + "/Sources")) ?? [])
    return ((try? packageDependencies(manifest)) ?? [:]).filter { sources.contains($0.key) && !$0.key.hasPrefix("C") }
  }()

  /// The `dependencies` of every `.target` and `.executableTarget` in a manifest's text, by name
  /// (a target without them maps to the empty set).
  static func packageDependencies(_ manifest: String) throws -> [String: Set<String>] {
    let pattern = #"\.(?:target|executableTarget)\(\s*name:\s*"([^"]+)"(?:,\s*dependencies:\s*\[([^\]]*)\])?"#
    let regex = try NSRegularExpression(pattern: pattern)
    let text = manifest as NSString
    var result: [String: Set<String>] = [:]
    for match in regex.matches(in: manifest, range: NSRange(location: 0, length: text.length)) {
      let name = text.substring(with: match.range(at: 1))
      var dependencies: Set<String> = []
      if match.range(at: 2).location != NSNotFound {
        let list = text.substring(with: match.range(at: 2))
        dependencies = Set(
          list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespacesAndNewlines.union(["\""])) }
            .filter { !$0.isEmpty })
      }
      result[name] = dependencies
    }
    return result
  }

  /// The example apps under Examples/: each imports only ProtFSKit, as an iOS app imports UIKit.
  static let examples = [
    "BackgroundRunner", "FetchHelper", "ForgetfulApp", "BackgroundDownloader", "UploadSession", "FetchDownloader",
    "PauseResume", "PortedApp", "PortedMainApp", "MisusedUpload", "TaskScheduler", "KeepAlive", "PushDownloader",
    "SharedSessionFetch", "NetworkClient", "SceneApp", "DownloadManager", "LegacyDelegate", "CrashingApp",
  ]

  /// The imports of every Swift file under `folder/target`, with the file's path.
  static func imports(of target: String, in folder: String = "Sources") throws -> [(file: String, module: String)] {
    let root = RepositoryLayout.packageRoot + "/" + folder + "/" + target
    guard let files = FileManager.default.enumerator(atPath: root) else { return [] }
    var result: [(String, String)] = []
    for case let file as String in files where file.hasSuffix(".swift") {
      let text = try String(contentsOfFile: root + "/" + file, encoding: .utf8)
      for line in text.split(separator: "\n") {
        let words = line.split(separator: " ")
        guard let index = words.firstIndex(of: "import"), index < words.count - 1 else { continue }
        // `import X`, `@testable import X`, `@_exported import X`, `import struct X.Y`.
        guard words[..<index].allSatisfy({ $0.hasPrefix("@") }) else { continue }
        let module = words.last!.split(separator: ".").first.map(String.init) ?? ""
        result.append((target + "/" + file, module))
      }
    }
    return result
  }

  @Test(arguments: allowed.keys.sorted())
  func eachTargetImportsOnlyWhatItMay(_ target: String) throws {
    let found = try Self.imports(of: target)
    #expect(!found.isEmpty, "no Swift file with an import under Sources/\(target)")
    for (file, module) in found where !Self.toolchain.contains(module) {
      #expect(Self.allowed[target]!.contains(module), "\(file) imports \(module)")
    }
  }

  @Test(arguments: allowed.keys.sorted())
  func eachTargetImportsEveryDependencyItLists(_ target: String) throws {
    let imported = Set(try Self.imports(of: target).map(\.module))
    for dependency in Self.allowed[target]!.subtracting(imported) {
      Issue.record("Package.swift lists \(dependency) as a dependency of \(target), which no file of it imports")
    }
  }

  @Test func theManifestIsRead() {
    // A manifest the pattern stopped matching would leave every check above with nothing to do.
    #expect(Self.allowed.count >= 12, "\(Self.allowed.keys.sorted())")
    #expect(Self.allowed["ProtFSSystem"] == ["CAttr", "CProtFSSys"])
    #expect(Self.allowed["protfs"] == ["ProtFSCLI", "CProtFSLaunch"])
  }

  @Test(arguments: examples)
  func eachExampleImportsOnlyTheUIKitShapedAPI(_ example: String) throws {
    let found = try Self.imports(of: example, in: "Examples")
    #expect(found.contains { $0.module == "ProtFSKit" }, "Examples/\(example) does not import ProtFSKit")
    for (file, module) in found where !Self.toolchain.contains(module) {
      #expect(module == "ProtFSKit", "Examples/\(file) imports \(module)")
    }
  }

  /// Every Swift file under `folder`, relative to the package root, with its lines.
  static func sourceFiles(in folder: String = "Sources") throws -> [(path: String, lines: [Substring])] {
    let root = RepositoryLayout.packageRoot
    guard let walker = FileManager.default.enumerator(atPath: root + "/" + folder) else { return [] }
    var files: [(String, [Substring])] = []
    for case let file as String in walker where file.hasSuffix(".swift") {
      let text = try String(contentsOfFile: root + "/" + folder + "/" + file, encoding: .utf8)
      files.append((folder + "/" + file, text.split(separator: "\n", omittingEmptySubsequences: false)))
    }
    return files
  }

  @Test func everyUncheckedSendableSaysWhatMakesItSafe() throws {
    // The compiler cannot check these: the comment just above the declaration (or in its first
    // lines) states the invariant, starting with "`@unchecked Sendable`:" or "// @unchecked:".
    var count = 0
    for (path, lines) in try Self.sourceFiles() {
      for (index, line) in lines.enumerated() where line.contains("@unchecked Sendable") {
        guard !line.trimmingCharacters(in: .whitespaces).hasPrefix("//") else { continue }
        count += 1
        let around = lines[max(0, index - 8)..<index] + lines[(index + 1)..<min(lines.count, index + 4)]
        let stated = around.contains {
          $0.trimmingCharacters(in: .whitespaces).hasPrefix("//") && $0.contains("@unchecked")
        }
        #expect(stated, "\(path):\(index + 1) is @unchecked Sendable without saying why it is safe")
      }
    }
    #expect(count > 0, "no @unchecked Sendable found: the search is broken")
  }

  @Test func everyTryQuestionMarkOnAWriteSaysWhyDroppingItsErrorIsRight() throws {
    // A heuristic: `try?` before a call whose name starts with a verb that writes (`record` only as
    // a prefix, as `recordLateAcknowledgements`: `record(_:)` reads one). The reason is a comment
    // on the same line or the line above.
    let writing = try Regex(#"try\?.*\b(write|save|store|update|insert|register|record[A-Z]|persist|set[A-Z])\w*\("#)
    var count = 0
    for (path, lines) in try Self.sourceFiles() {
      for (index, line) in lines.enumerated() where line.contains(writing) {
        guard !line.trimmingCharacters(in: .whitespaces).hasPrefix("//") else { continue }
        count += 1
        let above = index > 0 ? lines[index - 1].trimmingCharacters(in: .whitespaces) : ""
        let stated = line.contains("//") || above.hasPrefix("//")
        #expect(stated, "\(path):\(index + 1) drops a write's error with try? without saying why")
      }
    }
    #expect(count > 0, "no try? on a write found: the search is broken")
  }

  @Test func onlyTheSystemLayerImportsTheCShims() throws {
    for target in Self.allowed.keys where target != "ProtFSSystem" {
      for (file, module) in try Self.imports(of: target) {
        #expect(module != "CProtFSSys" && module != "CAttr", "\(file) imports \(module)")
      }
    }
  }

  @Test func onlyOneFunctionWritesTheClassAttribute() throws {
    // `ProtectionClass.write(to:)` in this file writes `user.protfs.class`; every other writer
    // calls it. A set-attribute call on the line naming the attribute, or on the line before (a
    // wrapped call), is another writer.
    let home = "Sources/ProtFS/Storage/AttributeName.swift"
    var found: [String] = []
    for (path, lines) in try Self.sourceFiles() {
      for (index, line) in lines.enumerated() where line.contains("AttributeName.protectionClass") {
        let call = lines[max(0, index - 1)...index].contains {
          $0.contains("setAttribute") || $0.contains("setxattr")
        }
        if call { found.append("\(path):\(index + 1)") }
      }
    }
    #expect(found.count == 1 && found[0].hasPrefix(home + ":"), "the class attribute is written at \(found)")
  }

  /// What starts, reaps, detaches or serves a process, which the CLI leaves to the library that
  /// owns the job (issue 65): ProtFSLaunch (launches, supervisors), ProtFSLock (the grace's end),
  /// ProtFSMount (the daemon), ProtFSSessions (the service). Each is a whole identifier, or a call
  /// on the type named before the dot.
  static let processAPIs = [
    "DetachedLaunch", "PlainLaunch", "ConfinedLaunch", "ConfinedSpawn", "AppSpawner", "Process", "posix_spawn",
    "waitForChild", "waitForChildEnd", "reapChildIfEnded", "waitForExit", "startProcess", "Kernel.kill",
    "Kernel.setsid", "ControlSocket.listen", "ControlSocket.listenAsService", "ControlSocket.accept",
  ]

  /// The uses of `processAPIs` in `source` (comments and strings aside), as `line: name`.
  static func processCalls(in source: String) throws -> [String] {
    let code = SyscallLayerTests.blankingCommentsAndStrings(source)
    let names = processAPIs.map { $0.replacingOccurrences(of: ".", with: #"\s*\.\s*"#) }
    // Simple boundaries: Unicode's join `DetachedLaunch.start` into one word.
    let pattern = try Regex(#"\b("# + names.joined(separator: "|") + #")\b"#).wordBoundaryKind(.simple)
    var found: [String] = []
    for (index, line) in code.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
      for match in line.matches(of: pattern) {
        found.append("\(index + 1): \(line[match.range].filter { !$0.isWhitespace })")
      }
    }
    return found
  }

  @Test func theCommandLineStartsNoProcessItself() throws {
    for (path, lines) in try Self.sourceFiles(in: "Sources/ProtFSCLI") {
      for call in try Self.processCalls(in: lines.joined(separator: "\n")) {
        Issue.record("\(path):\(call): the CLI starts, reaps or serves a process; call the library that owns it")
      }
    }
  }

  @Test func theProcessRuleFindsTheOldLaunchesAndOnlyThose() throws {
    let planted = """
      // DetachedLaunch.start in a comment, and "Kernel.waitForChild(pid)" in a string
      let pid = try DetachedLaunch.start(["--device", device.root, "__end-grace"])
      let status = (try? Kernel.waitForChild(daemon).get()) ?? 1
      if case .success(let code?) = Kernel.reapChildIfEnded(supervisor) { _ = Kernel.setsid() }
      let daemon = try MountDaemon.startProcess(executable, arguments: [], environment: [:], output: 1, errors: 2)
      _ = Kernel.kill(pid, SIGTERM); _ = ProcessIdentity(pid: pid); _ = MountDaemon.start(device, at: path)
      _ = Kernel.killProcessGroup(pid); let process = Process(); _ = ControlSocket.connect(name, servers: [])
      """
    #expect(
      try Self.processCalls(in: planted) == [
        "2: DetachedLaunch", "3: waitForChild", "4: reapChildIfEnded", "4: Kernel.setsid", "5: startProcess",
        "6: Kernel.kill", "7: Process",
      ])
  }

  @Test func theTargetsFormAChainWithoutCycles() {
    // Depth-first search over `allowed`: no target reaches itself.
    func reaches(_ start: String, _ goal: String, _ seen: inout Set<String>) -> Bool {
      for next in Self.allowed[start] ?? [] where Self.allowed[next] != nil {
        if next == goal { return true }
        if seen.insert(next).inserted && reaches(next, goal, &seen) { return true }
      }
      return false
    }
    for target in Self.allowed.keys {
      var seen: Set<String> = []
      #expect(!reaches(target, target, &seen), "\(target) depends on itself")
    }
    let features = [
      "ProtFSLock", "ProtFSCache", "ProtFSDownloads", "ProtFSAudit", "ProtFSFoundation", "ProtFSMount", "ProtFSApp",
      "ProtFSBackup", "ProtFSAppBundle",
    ]
    for feature in features {
      #expect(Self.allowed[feature]!.isDisjoint(with: features), "\(feature) imports another feature")
    }
  }

  @Test func everySourceTargetIsCovered() throws {
    let sources = try FileManager.default.contentsOfDirectory(atPath: RepositoryLayout.packageRoot + "/Sources")
    let swiftTargets = sources.filter { !$0.hasPrefix("C") }
    #expect(Set(swiftTargets) == Set(Self.allowed.keys))
    let examples = try FileManager.default.contentsOfDirectory(atPath: RepositoryLayout.packageRoot + "/Examples")
    #expect(Set(examples) == Set(Self.examples))
  }
}
