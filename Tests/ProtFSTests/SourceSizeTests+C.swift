import Foundation
import Testing

/// The size rules of issue 65 for the C targets: no `.c` or `.h` file under `Sources/` over 400
/// lines, and no C function over 60 lines from the first line of its signature to its closing
/// brace. A long C file is split by topic into files of its target (internal helpers in a private
/// header beside them, not in `include/`); a long function into named static steps.
extension SourceSizeTests {
  /// The endings of the C sources the rules hold for.
  static let cSuffixes = [".c", ".h"]

  @Test func noCSourceFileIsOverTheLimit() throws {
    var remaining: [String: Int] = [:]
    for file in try Self.sourceFiles(endingIn: Self.cSuffixes) {
      let lines = Self.lineCount(try String(contentsOfFile: Self.sources + "/" + file, encoding: .utf8))
      guard lines > Self.fileLimit else { continue }
      Issue.record("\(file) has \(lines) lines (at most \(Self.fileLimit))")
      remaining[Self.target(of: file), default: 0] += 1
    }
    if !remaining.isEmpty { Issue.record("C files over \(Self.fileLimit) lines by target: \(Self.summary(remaining))") }
  }

  @Test func noCFunctionIsOverTheLimit() throws {
    var remaining: [String: Int] = [:]
    for file in try Self.sourceFiles(endingIn: Self.cSuffixes) {
      let limit = Self.bodyLimit(in: Self.target(of: file))
      let source = try String(contentsOfFile: Self.sources + "/" + file, encoding: .utf8)
      for var function in Self.cFunctions(in: source) where function.lines > limit {
        function.file = file
        Issue.record("\(function) (at most \(limit))")
        remaining[Self.target(of: file), default: 0] += 1
      }
    }
    if !remaining.isEmpty { Issue.record("C functions over their limit by target: \(Self.summary(remaining))") }
  }

  @Test func theCMeasureFindsEachFunctionFromItsSignatureToItsClosingBrace() {
    let planted = #"""
      #define _GNU_SOURCE
      #include "shim.h"
      /* A comment with a brace { that opens nothing. */
      struct point {
        int x, y;
      };
      static const char *names[] = {"}", "{"};
      int declared(int a);
      static int
      split_signature(int a,
                      int b) {
        char open = '{';
        if (a) {
          return '}';
        }
        return b; // }
      }
      #define BLOCK(x) do { \
        x; \
        } while (0)
      __attribute__((constructor)) static void starter(void) {
        const char *text = "\"{";
      }
      typedef struct {
        int value;
      } boxed;
      int (*pointer)(int) = 0;
      static inline int one(void) { return 1; }
      """#
    let found = Self.cFunctions(in: planted).map { "\($0.line) \($0.name) \($0.lines)" }
    #expect(found == ["9 split_signature 9", "21 starter 3", "28 one 1"])
  }

  @Test func theCMeasureReportsAFunctionOverTheLimit() {
    let body = (1...60).map { "  step(\($0));" }.joined(separator: "\n")
    let planted = "static void long_one(void) {\n\(body)\n}\nvoid short_one(void) {\n  step(0);\n}\n"
    let found = Self.cFunctions(in: planted).map(\.description)
    #expect(found == [":1: long_one has 62 lines", ":63: short_one has 3 lines"])
  }

  // MARK: The C measure

  /// Every function defined in the C source `source`, in the order they start, read with
  /// comments, string and character literals and preprocessor lines blanked out: a function
  /// starts at a line that opens at its first column with a name (not `#`, `}` or a space), whose
  /// signature reaches a `{` right after a `)` with no `;` or `=` before it (a prototype, a
  /// variable, a `struct` or an initializer has none), and ends at the `}` matching that `{`.
  static func cFunctions(in source: String) -> [Body] {
    let code = Array(blankingCPreprocessorLines(blankingCCommentsAndLiterals(source)).utf8)
    var found: [Body] = []
    var lineStart = 0
    var line = 1
    while lineStart < code.count {
      if SyscallLayerTests.isIdentifierByte(code[lineStart]), let (open, name) = cFunctionStart(code, from: lineStart),
        let close = matchingBrace(code, from: open)
      {
        let lines = code[lineStart...close].count { $0 == UInt8(ascii: "\n") } + 1
        found.append(Body(line: line, name: name, lines: lines))
        line += lines - 1
        lineStart = close
      }
      guard let next = code[lineStart...].firstIndex(of: UInt8(ascii: "\n")) else { break }
      lineStart = next + 1
      line += 1
    }
    return found
  }

  /// The `{` opening the body of the function whose signature starts at `start`, and the
  /// function's name (the identifier before its parameter list, the last `(` at the top level),
  /// or nil when what starts there is no function definition.
  static func cFunctionStart(_ code: [UInt8], from start: Int) -> (Int, String)? {
    var depth = 0
    var parameters: Int?
    var lastSignificant: UInt8 = 0
    for j in start..<code.count {
      let byte = code[j]
      if byte == UInt8(ascii: "(") {
        if depth == 0 { parameters = j }
        depth += 1
      } else if byte == UInt8(ascii: ")") {
        depth -= 1
      } else if depth == 0 {
        if byte == UInt8(ascii: ";") || byte == UInt8(ascii: "=") || byte == UInt8(ascii: "}") { return nil }
        if byte == UInt8(ascii: "{") {
          guard lastSignificant == UInt8(ascii: ")"), let parameters else { return nil }
          var end = parameters
          while end > start, isSpace(code[end - 1]) || code[end - 1] == UInt8(ascii: "\n") { end -= 1 }
          var begin = end
          while begin > start, SyscallLayerTests.isIdentifierByte(code[begin - 1]) { begin -= 1 }
          return (j, String(decoding: code[begin..<end], as: UTF8.self))
        }
      }
      if !isSpace(byte) && byte != UInt8(ascii: "\n") { lastSignificant = byte }
    }
    return nil
  }

  /// `source` with every C comment, string literal and character literal turned into spaces,
  /// line breaks kept (C's block comments do not nest; a `\` escapes the next character).
  static func blankingCCommentsAndLiterals(_ source: String) -> String {
    let bytes = Array(source.utf8)
    var out = bytes
    var i = 0
    while i < bytes.count {
      let byte = bytes[i]
      let next = i + 1 < bytes.count ? bytes[i + 1] : 0
      var end: Int
      if byte == UInt8(ascii: "/") && next == UInt8(ascii: "/") {
        end = bytes[i...].firstIndex(of: UInt8(ascii: "\n")) ?? bytes.count
      } else if byte == UInt8(ascii: "/") && next == UInt8(ascii: "*") {
        end = i + 2
        while end < bytes.count && !(bytes[end - 1] == UInt8(ascii: "*") && bytes[end] == UInt8(ascii: "/")) {
          end += 1
        }
        end = min(bytes.count, end + 1)
      } else if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "'") {
        end = i + 1
        while end < bytes.count && bytes[end] != byte && bytes[end] != UInt8(ascii: "\n") {
          end += bytes[end] == UInt8(ascii: "\\") ? 2 : 1
        }
        end = min(bytes.count, end + 1)
      } else {
        i += 1
        continue
      }
      for k in i..<end where out[k] != UInt8(ascii: "\n") { out[k] = UInt8(ascii: " ") }
      i = end
    }
    return String(decoding: out, as: UTF8.self)
  }

  /// `code` (comments already blanked) with every preprocessor line, and the lines a `\` at the
  /// end continues it onto, turned into spaces: a macro's braces open and close no body.
  static func blankingCPreprocessorLines(_ code: String) -> String {
    var continued = false
    let lines = code.split(separator: "\n", omittingEmptySubsequences: false).map { line -> String in
      let isDirective = continued || line.drop(while: { $0 == " " || $0 == "\t" }).first == "#"
      continued = isDirective && line.trimmingCharacters(in: .whitespaces).hasSuffix("\\")
      return isDirective ? String(repeating: " ", count: line.utf8.count) : String(line)
    }
    return lines.joined(separator: "\n")
  }
}
