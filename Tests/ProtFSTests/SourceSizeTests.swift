import Foundation
import ProtFSTestSupport
import Testing

/// The size rules of issue 65: no Swift file under `Sources/` over 400 lines, and no function,
/// initializer, subscript or computed property over 60 lines from its declaration to its closing
/// brace (40 in `Sources/ProtFSCLI`, where a command only parses, asks the library and prints).
/// A long file is split by responsibility into `Type+Aspect.swift` files; a long function into
/// named steps. Each file or function over its limit is one issue, then one issue counts them by
/// target. The C targets' sources have the same limits (`SourceSizeTests+C.swift`).
@Suite("SourceSize")
struct SourceSizeTests {
  /// The most lines a Swift source file may have.
  static let fileLimit = 400

  /// The most lines a body may have in `target`.
  static func bodyLimit(in target: String) -> Int { target == "ProtFSCLI" ? 40 : 60 }

  /// A declaration with a body: where it starts, its name and how many lines it spans.
  struct Body: Equatable, CustomStringConvertible {
    /// The file, relative to `Sources/` (empty for planted source).
    var file = ""
    /// The line of its keyword (`func`, `init`, `var`, …), from 1.
    var line: Int
    /// The keyword and name as written (`func launch`, `init?`, `var position`).
    var name: String
    /// The lines from the keyword's to the closing brace's, both counted.
    var lines: Int
    /// The body as a test report names it.
    var description: String { "\(file):\(line): \(name) has \(lines) lines" }
  }

  @Test func noSourceFileIsOverTheLimit() throws {
    var remaining: [String: Int] = [:]
    for file in try Self.sourceFiles() {
      let lines = Self.lineCount(try String(contentsOfFile: Self.sources + "/" + file, encoding: .utf8))
      guard lines > Self.fileLimit else { continue }
      Issue.record("\(file) has \(lines) lines (at most \(Self.fileLimit))")
      remaining[Self.target(of: file), default: 0] += 1
    }
    if !remaining.isEmpty { Issue.record("files over \(Self.fileLimit) lines by target: \(Self.summary(remaining))") }
  }

  @Test func noFunctionIsOverTheLimit() throws {
    var remaining: [String: Int] = [:]
    for file in try Self.sourceFiles() {
      let limit = Self.bodyLimit(in: Self.target(of: file))
      let source = try String(contentsOfFile: Self.sources + "/" + file, encoding: .utf8)
      for var body in Self.bodies(in: source) where body.lines > limit {
        body.file = file
        Issue.record("\(body) (at most \(limit))")
        remaining[Self.target(of: file), default: 0] += 1
      }
    }
    if !remaining.isEmpty { Issue.record("functions over their limit by target: \(Self.summary(remaining))") }
  }

  @Test func theMeasureCountsEveryLineOfAFile() {
    #expect(Self.lineCount("") == 0)
    #expect(Self.lineCount("a\n") == 1)
    #expect(Self.lineCount("a\n\nb") == 3)
    #expect(Self.lineCount("a\n\n") == 2)
  }

  @Test func theMeasureFindsEachBodyFromItsKeywordToItsClosingBrace() {
    let planted = """
      protocol P {
        func required(_ a: Int) -> Int
        var property: Int { get }
      }
      struct S {
        var stored: [String: Int] = [:]
        var handler: (() -> Void)?
        let made = { () -> Int in
          return 1
        }()
        /// A doc comment with a brace { that does not open anything.
        func plain() {
          let text = "}}} not a close"  // nor is this }
          /* nor { this */
          _ = text
        }
        init?(
          value: Int, check: (Int) -> Bool = { $0 > 0 }
        ) throws(MyError)
        {
          guard check(value) else { return nil }
        }
        var computed: Int {
          get { 1 }
          set {}
        }
        func outer() -> Int {
          func inner() -> Int {
            #"raw "{" string"#.count
          }
          for var i in 0..<2 { i += 1 }
          return inner() + Self.init(x: 1).y
        }
        subscript(i: Int) -> Int { i }
        static func == (a: S, b: S) -> Bool where S: Equatable { true }
        deinit {}
      }
      """
    let found = Self.bodies(in: planted).map { "\($0.line) \($0.name) \($0.lines)" }
    #expect(
      found == [
        "3 var property 1", "12 func plain 5", "17 init? 6", "23 var computed 4", "27 func outer 7",
        "28 func inner 3", "34 subscript 1", "35 func == 1", "36 deinit 1",
      ])
  }

  @Test func theMeasureIgnoresACallOfAnInitializer() {
    let planted = """
      let a = Foo.init(x: 1)
      let b = [1].map(String.init)
      """
    #expect(Self.bodies(in: planted).isEmpty)
  }

  // MARK: The measure

  /// `Sources/` of this package.
  static let sources = RepositoryLayout.packageRoot + "/Sources"

  /// Every file under `Sources/` whose name ends with one of `suffixes` (Swift files unless
  /// told), relative to it, sorted.
  static func sourceFiles(endingIn suffixes: [String] = [".swift"]) throws -> [String] {
    guard let walker = FileManager.default.enumerator(atPath: sources) else { return [] }
    return walker.compactMap { $0 as? String }.filter { file in suffixes.contains { file.hasSuffix($0) } }.sorted()
  }

  /// The target a file below `Sources/` belongs to: its first path component.
  static func target(of file: String) -> String {
    String(file.split(separator: "/").first ?? "")
  }

  /// `counts` as "TargetA 3, TargetB 1", by target name.
  static func summary(_ counts: [String: Int]) -> String {
    counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
  }

  /// The lines of `source`, as `wc -l` counts them (a last line without a line end counts too).
  static func lineCount(_ source: String) -> Int {
    let breaks = source.utf8.count { $0 == UInt8(ascii: "\n") }
    return source.isEmpty || source.utf8.last == UInt8(ascii: "\n") ? breaks : breaks + 1
  }

  /// What starts a declaration (a word, an attribute's `@`, a `#if`) or ends one (`}`): met at
  /// the start of a line before a body opened, it shows that the declaration before had none (a
  /// protocol's requirement).
  static let declarationStarts: Set<String> = [
    "func", "var", "let", "init", "deinit", "subscript", "case", "static", "class", "struct", "enum", "protocol",
    "extension", "typealias", "associatedtype", "public", "package", "internal", "fileprivate", "private", "open",
    "final", "override", "mutating", "nonmutating", "convenience", "required", "nonisolated", "@", "#", "}",
  ]

  /// Every declaration in `source` that has a body: functions, initializers, deinitializers,
  /// subscripts and computed properties, read with comments and string literals blanked out
  /// (`SyscallLayerTests.blankingCommentsAndStrings`), in the order they start.
  static func bodies(in source: String) -> [Body] {
    let code = Array(SyscallLayerTests.blankingCommentsAndStrings(source).utf8)
    var lineStarts = [0]
    for (index, byte) in code.enumerated() where byte == UInt8(ascii: "\n") { lineStarts.append(index + 1) }
    // The line holding `offset`: the number of line starts at or before it.
    func line(at offset: Int) -> Int {
      var (low, high) = (0, lineStarts.count)
      while low < high {
        let middle = (low + high) / 2
        if lineStarts[middle] <= offset { low = middle + 1 } else { high = middle }
      }
      return low
    }
    var found: [Body] = []
    var i = 0
    while i < code.count {
      guard isWordStart(code, i) else {
        i += 1
        continue
      }
      let word = Self.word(code, at: i)
      defer { i += max(1, word.utf8.count) }
      guard let (name, afterName) = declaration(word, code, at: i),
        let open = bodyStart(code, from: afterName, isProperty: word == "var"),
        let close = matchingBrace(code, from: open)
      else { continue }
      let first = line(at: i)
      found.append(Body(line: first, name: name, lines: line(at: close) - first + 1))
    }
    return found
  }

  /// The declaration `word` starts at `i` (its name as a report shows it, and where its signature
  /// goes on), or nil when `word` starts none: a `var` without a type annotation is a pattern,
  /// `init` after a `.` a call.
  static func declaration(_ word: String, _ code: [UInt8], at i: Int) -> (String, Int)? {
    var j = i + word.utf8.count
    switch word {
    case "func":
      j = skipSpaces(code, from: j)
      let start = j
      while j < code.count, !isSpace(code[j]), code[j] != UInt8(ascii: "("), code[j] != UInt8(ascii: "<") { j += 1 }
      guard j > start else { return nil }
      return ("func " + String(decoding: code[start..<j], as: UTF8.self), j)
    case "init":
      var name = "init"
      if j < code.count, code[j] == UInt8(ascii: "?") || code[j] == UInt8(ascii: "!") {
        name.append(Character(UnicodeScalar(code[j])))
        j += 1
      }
      let next = skipSpaces(code, from: j)
      guard next < code.count, code[next] == UInt8(ascii: "(") || code[next] == UInt8(ascii: "<") else { return nil }
      return (name, j)
    case "deinit", "subscript":
      return (word, j)
    case "var":
      j = skipSpaces(code, from: j)
      guard isWordStart(code, j) else { return nil }
      let name = Self.word(code, at: j)
      j = skipSpaces(code, from: j + name.utf8.count)
      guard j < code.count, code[j] == UInt8(ascii: ":") else { return nil }
      return ("var " + name, j + 1)
    default:
      return nil
    }
  }

  /// The `{` that opens the body of the declaration whose signature goes on at `start`, or nil
  /// when it has none: parentheses and brackets are skipped whole (a default argument's closure),
  /// and the signature ends without a body at a `}`, a `;`, a blank line, a line starting another
  /// declaration, and, for a property, at `=` (a stored one) or its line's end.
  static func bodyStart(_ code: [UInt8], from start: Int, isProperty: Bool) -> Int? {
    var depth = 0
    var j = start
    while j < code.count {
      let byte = code[j]
      if byte == UInt8(ascii: "(") || byte == UInt8(ascii: "[") {
        depth += 1
      } else if byte == UInt8(ascii: ")") || byte == UInt8(ascii: "]") {
        depth -= 1
      } else if depth == 0 {
        if byte == UInt8(ascii: "{") { return j }
        if byte == UInt8(ascii: "}") || byte == UInt8(ascii: ";") { return nil }
        if isProperty, byte == UInt8(ascii: "=") { return nil }
        if byte == UInt8(ascii: "\n") {
          if isProperty { return nil }
          let next = skipSpaces(code, from: j + 1)
          if next >= code.count || code[next] == UInt8(ascii: "\n") { return nil }
          let word = Self.word(code, at: next)
          let head = word.isEmpty ? String(UnicodeScalar(code[next])) : word
          if declarationStarts.contains(head) { return nil }
        }
      }
      j += 1
    }
    return nil
  }

  /// The `}` closing the `{` at `open`.
  static func matchingBrace(_ code: [UInt8], from open: Int) -> Int? {
    var depth = 0
    for j in open..<code.count {
      if code[j] == UInt8(ascii: "{") {
        depth += 1
      } else if code[j] == UInt8(ascii: "}") {
        depth -= 1
        if depth == 0 { return j }
      }
    }
    return nil
  }

  /// Whether an identifier starts at `i`: not inside another, nor after a `.` (a member).
  static func isWordStart(_ code: [UInt8], _ i: Int) -> Bool {
    guard i < code.count, SyscallLayerTests.isIdentifierByte(code[i]), !(code[i] >= 0x30 && code[i] <= 0x39) else {
      return false
    }
    return i == 0 || (!SyscallLayerTests.isIdentifierByte(code[i - 1]) && code[i - 1] != UInt8(ascii: "."))
  }

  /// The identifier starting at `i` (empty when none does).
  static func word(_ code: [UInt8], at i: Int) -> String {
    var j = i
    while j < code.count, SyscallLayerTests.isIdentifierByte(code[j]) { j += 1 }
    return String(decoding: code[i..<j], as: UTF8.self)
  }

  /// Where the spaces and tabs from `i` end.
  static func skipSpaces(_ code: [UInt8], from i: Int) -> Int {
    var j = i
    while j < code.count, isSpace(code[j]) { j += 1 }
    return j
  }

  /// Whether `byte` is a space or a tab.
  static func isSpace(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
}
