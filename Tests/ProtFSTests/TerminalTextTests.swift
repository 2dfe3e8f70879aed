import ProtFS
import Testing

/// What others name reaches a terminal escaped (`TerminalText`), as `ls` and `git` show it.
struct TerminalTextTests {
  @Test(arguments: [
    ("plain name.txt", "plain name.txt", "plain name.txt"),
    ("\u{1B}]0;title\u{07}", "\\x1b]0;title\\x07", "\\x1b]0;title\\x07"),
    ("a\rb", "a\\rb", "a\\rb"),
    ("two\nlines\tand tab", "two\\nlines\\tand tab", "two\nlines\tand tab"),
    ("\u{7F}\u{9B}31m", "\\x7f\\u{9b}31m", "\\x7f\\u{9b}31m"),
    ("txt.\u{202E}exe", "txt.\\u{202e}exe", "txt.\\u{202e}exe"),
    ("\u{0}", "\\x00", "\\x00"),
    ("café ✓ 日本", "café ✓ 日本", "café ✓ 日本"),
  ])
  func controlsAreEscapedAndTextIsKept(_ text: String, _ escaped: String, _ keepingLineBreaks: String) {
    #expect(TerminalText.escaped(text) == escaped)
    #expect(TerminalText.escaped(text, keepingLineBreaks: true) == keepingLineBreaks)
  }
}
