import Foundation
import ProtFSTestSupport
import Testing

/// docs/architecture.md says which target may import which, and where each one is: it must say
/// what Package.swift says, so that a newcomer who reads it learns the layers as they are.
@Suite("Architecture page")
struct ArchitectureDocTests {
  static let page =
    (try? String(contentsOfFile: RepositoryLayout.packageRoot + "/docs/architecture.md", encoding: .utf8)) ?? ""

  /// The source targets of Package.swift (the C shims, the examples and the tests' aside) and what
  /// each lists.
  static let manifest: [String: Set<String>] = {
    let text = (try? String(contentsOfFile: RepositoryLayout.packageRoot + "/Package.swift", encoding: .utf8)) ?? ""
    let sources = Set(
      (try? FileManager.default.contentsOfDirectory(atPath: RepositoryLayout.packageRoot + "/Sources")) ?? [])
    return ((try? LayeringTests.packageDependencies(text)) ?? [:]).filter {
      sources.contains($0.key) && !$0.key.hasPrefix("C")
    }
  }()

  /// Each target's bullet in the Targets section, by name: its text up to the next bullet.
  static let bullets: [String: String] = {
    guard let start = page.range(of: "## Targets"),
      let end = page.range(of: "\n## ", range: start.upperBound..<page.endIndex)
    else { return [:] }
    var result: [String: String] = [:]
    for item in page[start.upperBound..<end.lowerBound].components(separatedBy: "\n- `").dropFirst() {
      guard let close = item.firstIndex(of: "`") else { continue }
      result[String(item[..<close])] = item.split(whereSeparator: \.isWhitespace).joined(separator: " ")
    }
    return result
  }()

  /// What a bullet's "May import:" names: backquoted targets, and "the model" for ProtFS and
  /// ProtFSSystem.
  static func mayImport(_ bullet: String) -> Set<String>? {
    guard let range = bullet.range(of: "May import:") else { return nil }
    var sentence = bullet[range.upperBound...]
    if let stop = sentence.range(of: ". ") ?? sentence.range(of: ".", options: .backwards) {
      sentence = sentence[..<stop.lowerBound]
    }
    var names = Set<String>()
    if sentence.contains("the model") { names.formUnion(["ProtFS", "ProtFSSystem"]) }
    let parts = sentence.components(separatedBy: "`")
    for index in stride(from: 1, to: parts.count, by: 2) { names.insert(parts[index]) }
    return names.filter { $0.lowercased().hasPrefix("protfs") }
  }

  @Test func theManifestAndThePageAreRead() {
    #expect(Self.manifest.count >= 12)
    #expect(Self.bullets.count >= 12)
  }

  @Test func everyLibraryTargetHasABulletAndEveryBulletATarget() {
    let targets = Set(Self.manifest.keys)
    #expect(Set(Self.bullets.keys) == targets)
  }

  @Test func eachBulletSaysWhatItsTargetMayImport() {
    for (target, bullet) in Self.bullets {
      guard let listed = Self.manifest[target] else { continue }
      let said = Self.mayImport(bullet)
      #expect(
        said == listed.filter { !$0.hasPrefix("C") }, "\(target): the page says \(said ?? []), Package.swift \(listed)")
    }
  }

  @Test func theCountOfTargetsIsTheManifests() {
    let words = [
      9: "nine", 10: "ten", 11: "eleven", 12: "twelve", 13: "thirteen", 14: "fourteen", 15: "fifteen", 16: "sixteen",
      17: "seventeen", 18: "eighteen",
    ]
    let count = Self.manifest.count
    let text = Self.page.split(whereSeparator: \.isWhitespace).joined(separator: " ")
    #expect(text.contains("is \(words[count] ?? "\(count)") SwiftPM targets"), "\(count) targets")
  }

  @Test func theLayoutNamesEverySourceDirectory() throws {
    let sources = try FileManager.default.contentsOfDirectory(atPath: RepositoryLayout.packageRoot + "/Sources")
    let start = try #require(Self.page.range(of: "## Repository layout"))
    let layout = Self.page[start.upperBound...]
    for name in sources where !name.hasPrefix(".") {
      #expect(layout.range(of: #"\b\#(name)\b"#, options: .regularExpression) != nil, "\(name)")
    }
  }

  /// A target of more than 15 files keeps them in folders that name its parts (`Engine/`,
  /// `Store/`), with at most three at its top, so that a newcomer finds a behaviour by its folder.
  @Test func aLargeTargetIsInFolders() throws {
    let sources = RepositoryLayout.packageRoot + "/Sources"
    for target in try FileManager.default.contentsOfDirectory(atPath: sources) where !target.hasPrefix(".") {
      let files = (FileManager.default.subpaths(atPath: sources + "/" + target) ?? []).filter {
        $0.hasSuffix(".swift")
      }
      guard files.count > 15 else { continue }
      let top = files.filter { !$0.contains("/") }
      #expect(top.count <= 3, "\(target): \(files.count) files, \(top.count) outside a folder: \(top)")
    }
  }

  /// The targets under Tests/ say what they import too: each lists the modules its files import
  /// and nothing else, but for the executables it lists so that `swift test` builds them.
  @Test func everyTestTargetListsWhatItImports() throws {
    let root = RepositoryLayout.packageRoot
    let manifest = try String(contentsOfFile: root + "/Package.swift", encoding: .utf8)
    let pattern =
      #"\.(target|executableTarget|testTarget)\(\s*name:\s*"([^"]+)"(?:,\s*dependencies:\s*\[([^\]]*)\])?(?:,\s*path:\s*"([^"]+)")?"#
    let regex = try NSRegularExpression(pattern: pattern)
    let text = manifest as NSString
    var executables = Set<String>()
    var tests: [(name: String, directory: String, listed: Set<String>)] = []
    for match in regex.matches(in: manifest, range: NSRange(location: 0, length: text.length)) {
      func group(_ index: Int) -> String? {
        match.range(at: index).location == NSNotFound ? nil : text.substring(with: match.range(at: index))
      }
      let kind = group(1)!
      let name = group(2)!
      if kind == "executableTarget" { executables.insert(name) }
      let directory = group(4) ?? (kind == "testTarget" ? "Tests/\(name)" : "Sources/\(name)")
      guard directory.hasPrefix("Tests/") else { continue }
      let listed = Set(
        (group(3) ?? "").components(separatedBy: "\"").enumerated().filter { $0.offset % 2 == 1 }.map(\.element))
      tests.append((name, directory, listed))
    }
    #expect(tests.count >= 6)
    let toolchain: Set<String> = [
      "Foundation", "FoundationXML", "FoundationNetworking", "Dispatch", "Synchronization", "Glibc", "Testing",
      "XCTest",
    ]
    for test in tests {
      var imported = Set<String>()
      for file in FileManager.default.subpaths(atPath: root + "/" + test.directory) ?? [] where file.hasSuffix(".swift")
      {
        let source = try String(contentsOfFile: root + "/" + test.directory + "/" + file, encoding: .utf8)
        // A Swift import starts its line; a Python one inside a test's script is indented.
        for line in source.split(separator: "\n") where line.hasPrefix("import ") || line.hasPrefix("@testable import ")
        {
          imported.insert(String(line.split(separator: " ").last!))
        }
      }
      imported.subtract(toolchain)
      #expect(imported == test.listed.subtracting(executables), "\(test.name)")
    }
  }

  /// Public API only in products: a target no library product lists declares nothing `public`
  /// (what the package shares between its own targets is `package`), so that the API reference
  /// and the products are the whole public surface.
  @Test func onlyTheProductsTargetsDeclarePublicAPI() throws {
    let root = RepositoryLayout.packageRoot
    let manifest = try String(contentsOfFile: root + "/Package.swift", encoding: .utf8)
    let regex = try NSRegularExpression(pattern: #"\.library\(\s*name:\s*"[^"]+",\s*targets:\s*\[([^\]]*)\]"#)
    let text = manifest as NSString
    var inProducts = Set<String>()
    for match in regex.matches(in: manifest, range: NSRange(location: 0, length: text.length)) {
      let list = text.substring(with: match.range(at: 1)).components(separatedBy: "\"")
      inProducts.formUnion(list.enumerated().filter { $0.offset % 2 == 1 }.map(\.element))
    }
    #expect(inProducts.contains("ProtFSKit") && inProducts.contains("ProtFSSystem"))
    for target in Self.manifest.keys where !inProducts.contains(target) {
      for file in FileManager.default.subpaths(atPath: root + "/Sources/" + target) ?? [] where file.hasSuffix(".swift")
      {
        let source = try String(contentsOfFile: root + "/Sources/\(target)/\(file)", encoding: .utf8)
        let lines = source.split(separator: "\n").filter {
          $0.drop(while: { $0 == " " || $0 == "@" }).hasPrefix("public ")
            || $0.contains(" public ")
              && !$0.trimmingCharacters(in: .whitespaces).hasPrefix("//")
        }
        #expect(lines.isEmpty, "\(target)/\(file) is in no product but declares: \(lines.first ?? "")")
      }
    }
  }
}
