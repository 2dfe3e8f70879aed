import Foundation
import ProtFSTestSupport
import Testing

/// The repository's Markdown reads in a terminal and a browser alike: no line over 120 characters
/// (code blocks included), every relative link leads to a file, and every `#anchor` to a heading
/// there. And the README shows the test command CI runs.
@Suite struct MarkdownTests {
  static let root = RepositoryLayout.packageRoot
  static let widest = 120

  /// Every Markdown file of the repository, relative to its root, outside hidden and build
  /// directories.
  static func markdownFiles() throws -> [String] {
    var files: [String] = []
    let walker = FileManager.default.enumerator(atPath: root)!
    while let path = walker.nextObject() as? String {
      let name = (path as NSString).lastPathComponent
      if name.hasPrefix(".") || name == "Packages" {
        walker.skipDescendants()
        continue
      }
      if name.hasSuffix(".md") { files.append(path) }
    }
    return files.sorted()
  }

  static func read(_ path: String) throws -> String {
    try String(contentsOfFile: root + "/" + path, encoding: .utf8)
  }

  @Test func theRepositoryHasItsDocumentation() throws {
    let files = try Self.markdownFiles()
    for expected in ["README.md", "docs/cli.md", "docs/semantics.md", "benchmarks/RESULTS.md", "CONTRIBUTING.md"] {
      #expect(files.contains(expected), "\(expected) missing from \(files)")
    }
  }

  @Test func noLineIsLongerThan120Characters() throws {
    for file in try Self.markdownFiles() {
      let lines = try Self.read(file).split(separator: "\n", omittingEmptySubsequences: false)
      for (number, line) in lines.enumerated() where line.count > Self.widest {
        Issue.record("\(file):\(number + 1) has \(line.count) characters (at most \(Self.widest)): \(line.prefix(60))…")
      }
    }
  }

  @Test func everyRelativeLinkLeadsToAFileAndItsAnchorToAHeading() throws {
    for file in try Self.markdownFiles() {
      let directory = URL(fileURLWithPath: Self.root + "/" + file).deletingLastPathComponent()
      for link in Markdown.links(in: try Self.read(file)) {
        if link.contains("://") || link.hasPrefix("mailto:") { continue }
        let parts = link.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        let target =
          parts[0].isEmpty ? URL(fileURLWithPath: Self.root + "/" + file) : directory.appendingPathComponent(parts[0])
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: target.path, isDirectory: &isDirectory) else {
          Issue.record("\(file): the link \(link) leads to no file (\(target.standardized.path))")
          continue
        }
        guard parts.count == 2, !isDirectory.boolValue, target.pathExtension == "md" else { continue }
        let anchors = Markdown.anchors(in: try String(contentsOf: target, encoding: .utf8))
        #expect(anchors.contains(parts[1]), "\(file): no heading in \(parts[0]) has the anchor #\(parts[1])")
      }
    }
  }

  @Test func theReadmeShowsTheTestCommandCIRuns() throws {
    // .ci/run ends with the README's test command; the README shows it in a code block.
    let ci = try Self.read(".ci/run").split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
    let command = try #require(ci.last { !$0.isEmpty && !$0.hasPrefix("#") })
    #expect(command == "bash scripts/test.sh", "\(command)")
    let code = Markdown.codeLines(in: try Self.read("README.md"))
    #expect(code.contains { $0 == command || $0.hasPrefix(command + " ") }, "README.md does not show `\(command)`")
  }

  @Test func anchorsAreMadeAsGitHubMakesThem() {
    let anchors = Markdown.anchors(
      in: "# protfs\n## What `protfs exec` guarantees\n```\n# not a heading\n```\n## Install\n## Install\n")
    #expect(anchors == ["protfs", "what-protfs-exec-guarantees", "install", "install-1"])
    #expect(
      Markdown.links(in: "see [a](docs/a.md#x) and `[b](c.md)`\n```\n[d](e.md)\n```\n[f]: g.md\n") == [
        "docs/a.md#x", "g.md",
      ])
  }
}

/// Just enough of Markdown for the checks above: code blocks, headings, links.
enum Markdown {
  /// The lines of `text` with a flag saying whether each is inside a fenced code block (the
  /// fences themselves count as code).
  static func lines(_ text: String) -> [(line: String, isCode: Bool)] {
    var fence: String? = nil
    var out: [(String, Bool)] = []
    for line in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
      let trimmed = line.trimmingCharacters(in: .whitespaces)
      if let open = fence {
        out.append((line, true))
        if trimmed.hasPrefix(open) && trimmed.allSatisfy({ $0 == open.first }) { fence = nil }
      } else if trimmed.hasPrefix("```") || trimmed.hasPrefix("~~~") {
        fence = String(trimmed.prefix { $0 == trimmed.first })
        out.append((line, true))
      } else {
        out.append((line, false))
      }
    }
    return out
  }

  /// The lines inside code blocks, trimmed.
  static func codeLines(in text: String) -> [String] {
    lines(text).filter(\.isCode).map { $0.line.trimmingCharacters(in: .whitespaces) }
  }

  /// The anchors of the headings, as GitHub makes them: lower case, punctuation but `-` and `_`
  /// dropped, spaces as `-`, and `-1`, `-2` for repeats.
  static func anchors(in text: String) -> [String] {
    var seen: [String: Int] = [:]
    var anchors: [String] = []
    for (line, isCode) in lines(text) where !isCode {
      guard line.hasPrefix("#") else { continue }
      let hashes = line.prefix { $0 == "#" }
      guard hashes.count <= 6, line.dropFirst(hashes.count).first == " " else { continue }
      let title = line.dropFirst(hashes.count).trimmingCharacters(in: .whitespaces)
      var slug = ""
      for character in title.lowercased() {
        if character.isLetter || character.isNumber || character == "-" || character == "_" {
          slug.append(character)
        } else if character == " " {
          slug.append("-")
        }
      }
      let count = seen[slug, default: 0]
      seen[slug] = count + 1
      anchors.append(count == 0 ? slug : "\(slug)-\(count)")
    }
    return anchors
  }

  /// The targets of inline links (`[text](target)`) and reference definitions (`[x]: target`),
  /// outside code blocks and code spans.
  static func links(in text: String) -> [String] {
    var targets: [String] = []
    for (line, isCode) in lines(text) where !isCode {
      // Code spans out: the odd pieces between backticks.
      let prose = line.split(separator: "`", omittingEmptySubsequences: false).enumerated()
        .filter { $0.offset.isMultiple(of: 2) }.map { String($0.element) }.joined(separator: " ")
      if let definition = prose.firstMatch(of: /^\s{0,3}\[[^\]]+\]:\s+(\S+)/) {
        targets.append(String(definition.1))
        continue
      }
      for match in prose.matches(of: /\]\(([^)\s]+)(?:\s+"[^"]*")?\)/) {
        targets.append(String(match.1).trimmingCharacters(in: CharacterSet(charactersIn: "<>")))
      }
    }
    return targets
  }
}
