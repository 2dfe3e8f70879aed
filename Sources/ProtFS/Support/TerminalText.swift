/// Text that others control, made harmless before a terminal shows it.
///
/// An app names its background tasks, sessions and files; a backup names its domains and paths; a
/// server names its files. Printed as they are, their control characters act on the reader's
/// terminal: an escape sequence retitles it, clears it, or writes its clipboard (OSC 52); a
/// carriage return hides what came before on the line; bidirectional overrides reorder what is
/// shown. As `ls` and `git` do, each such character is shown escaped instead (`\x1b`, `\r`,
/// `\u{202E}`), so that the reader sees what is there and the terminal does nothing.
public enum TerminalText {
  /// `text` with every control character escaped: C0 controls (line feeds and tabs too, unless
  /// `keepingLineBreaks`), DEL, C1 controls, and the bidirectional embeddings, overrides and
  /// isolates.
  public static func escaped(_ text: String, keepingLineBreaks: Bool = false) -> String {
    guard text.unicodeScalars.contains(where: { needsEscape($0, keepingLineBreaks: keepingLineBreaks) }) else {
      return text
    }
    var result = ""
    result.reserveCapacity(text.utf8.count + 8)
    for scalar in text.unicodeScalars {
      guard needsEscape(scalar, keepingLineBreaks: keepingLineBreaks) else {
        result.unicodeScalars.append(scalar)
        continue
      }
      switch scalar {
      case "\n": result += "\\n"
      case "\t": result += "\\t"
      case "\r": result += "\\r"
      default:
        let hex = String(scalar.value, radix: 16)
        result += scalar.value < 0x80 ? "\\x" + (hex.count == 1 ? "0" : "") + hex : "\\u{" + hex + "}"
      }
    }
    return result
  }

  private static func needsEscape(_ scalar: Unicode.Scalar, keepingLineBreaks: Bool) -> Bool {
    switch scalar.value {
    case 0x0A, 0x09: return !keepingLineBreaks
    case 0x00...0x1F, 0x7F, 0x80...0x9F: return true
    // LRE, RLE, PDF, LRO, RLO; LRI, RLI, FSI, PDI.
    case 0x202A...0x202E, 0x2066...0x2069: return true
    default: return false
    }
  }
}
