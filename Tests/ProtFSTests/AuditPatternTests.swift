import Foundation
import ProtFS
import ProtFSAudit
import Testing

@Suite("Audit path patterns (.gitignore semantics)")
struct AuditPatternTests {
  struct Case: CustomTestStringConvertible, Sendable {
    var pattern: String
    var path: String
    var isDirectory = false
    var matches: Bool
    var testDescription: String { "\(pattern) ~ \(path)\(isDirectory ? "/" : "") = \(matches)" }
  }

  static let cases: [Case] = [
    // Anchoring: a middle or leading slash anchors; otherwise any depth.
    Case(pattern: "Documents/**", path: "Documents/a/b.txt", matches: true),
    Case(pattern: "Documents/**", path: "Documents", isDirectory: true, matches: false),
    Case(pattern: "Documents/**", path: "x/Documents/a", matches: false),
    Case(pattern: "/db.sqlite", path: "db.sqlite", matches: true),
    Case(pattern: "/db.sqlite", path: "a/db.sqlite", matches: false),
    Case(pattern: "db.sqlite", path: "a/b/db.sqlite", matches: true),
    Case(pattern: "*.sqlite-wal", path: "Library/x/db.sqlite-wal", matches: true),
    Case(pattern: "*.sqlite-wal", path: "Library/x/db.sqlite-walx", matches: false),
    // Directories only.
    Case(pattern: "Documents/", path: "Documents", isDirectory: true, matches: true),
    Case(pattern: "Documents/", path: "Documents", matches: false),
    Case(pattern: "cache/", path: "a/cache", isDirectory: true, matches: true),
    // Stars stay inside a component; ** spans components.
    Case(pattern: "a/*/c", path: "a/b/c", matches: true),
    Case(pattern: "a/*/c", path: "a/b/x/c", matches: false),
    Case(pattern: "a/**/c", path: "a/c", matches: true),
    Case(pattern: "a/**/c", path: "a/b/x/c", matches: true),
    Case(pattern: "**/foo", path: "foo", matches: true),
    Case(pattern: "**/foo", path: "x/y/foo", matches: true),
    Case(pattern: "**", path: "anything/at/all", matches: true),
    Case(pattern: "a*", path: "abc/def", matches: false),
    // ?, sets, escapes, UTF-8.
    Case(pattern: "f?o", path: "foo", matches: true),
    Case(pattern: "f?o", path: "fo", matches: false),
    Case(pattern: "[a-c]x", path: "bx", matches: true),
    Case(pattern: "[a-c]x", path: "dx", matches: false),
    Case(pattern: "[!a-c]x", path: "dx", matches: true),
    Case(pattern: "[^a-c]x", path: "ax", matches: false),
    Case(pattern: "\\*", path: "*", matches: true),
    Case(pattern: "\\*", path: "a", matches: false),
    Case(pattern: "é*", path: "éclair", matches: true),
    Case(pattern: "?", path: "é", matches: true),
    Case(pattern: "[é]", path: "é", matches: true),
    Case(pattern: "Library/Application Support/**", path: "Library/Application Support/db", matches: true),
    Case(pattern: "CFNetworkDownload_*.tmp", path: "L/C/CFNetworkDownload_aB3.tmp", matches: true),
  ]

  @Test(arguments: cases)
  func matching(_ testCase: Case) throws {
    let pattern = try PathPattern(testCase.pattern)
    #expect(pattern.matches(testCase.path, isDirectory: testCase.isDirectory) == testCase.matches)
  }

  @Test func matchesBytesThatAreNotUTF8() throws {
    let pattern = try PathPattern("tmp/*")
    let bytes: [UInt8] = Array("tmp/bad".utf8) + [0xFF, 0xFE]
    let ranges = [0..<3, 4..<bytes.count]
    let matched = bytes.withUnsafeBufferPointer { path in
      ranges.withUnsafeBufferPointer { pattern.matches(path, components: $0, isDirectory: false) }
    }
    #expect(matched)
  }

  @Test(arguments: [
    ("[abc", 0, "closing ']'"), ("a/[b", 2, "closing ']'"), ("ab\\", 2, "after '\\'"), ("", 0, "non-empty"),
  ])
  func syntaxErrors(_ text: String, _ offset: Int, _ expected: String) {
    #expect {
      _ = try PathPattern(text)
    } throws: { error in
      guard let error = error as? PathPattern.SyntaxError else { return false }
      return error.offset == offset && error.expected.contains(expected)
    }
  }

  @Test(arguments: ["a//b", "../x", "Documents/./x", "/./"])
  func patternsThatCanNeverMatch(_ text: String) throws {
    #expect(try PathPattern(text).neverMatchesReason != nil)
  }

  @Test(arguments: ["Documents/**", "*.sqlite-wal", "a/**/b", "tmp/"])
  func patternsThatCanMatch(_ text: String) throws {
    #expect(try PathPattern(text).neverMatchesReason == nil)
  }
}
