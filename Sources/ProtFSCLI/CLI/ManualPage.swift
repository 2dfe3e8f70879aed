import Foundation
import ProtFS

/// A command's manual page in roff (man(7) macros), generated from the same description as its
/// `--help`: `protfs help --man [COMMAND ...]` prints it, `scripts/man.sh` writes every page.
/// Pages are named as git's are: `protfs(1)`, `protfs-app-launch(1)`.
package enum ManualPage {
  /// The page's name for `chain`, for example `protfs-app-launch`.
  package static func name(_ chain: [Command]) -> String { chain.map(\.name).joined(separator: "-") }

  /// The ARGUMENTS section of `command`'s page; empty when it takes none.
  static func arguments(_ command: Command) -> String {
    guard !command.arguments.isEmpty else { return "" }
    var out = ".SH ARGUMENTS\n"
    for argument in command.arguments {
      let variadic = argument.isVariadic ? " ..." : ""
      out += ".TP\n\\fI<\(escape(argument.name))>\\fR\(variadic)\n\(escape(argument.help))\n"
    }
    return out
  }

  /// The OPTIONS section of the page of the last command of `chain`.
  static func options(_ chain: [Command]) -> String {
    var out = ".SH OPTIONS\n"
    for option in chain.last!.acceptedOptions(isTop: chain.count == 1) {
      var label = option.short.map { "\\fB\\-\($0)\\fR, " } ?? ""
      label += "\\fB\\-\\-\(escape(option.long))\\fR"
      if let value = option.valueName { label += " \\fI<\(escape(value))>\\fR" }
      out += ".TP\n\(label)\n\(escape(option.help))\n"
    }
    return out
  }

  /// Every visible command's chain, depth first: one page each.
  package static func chains(_ chain: [Command] = [Commands.root]) -> [[Command]] {
    [chain] + chain.last!.subcommands.filter { !$0.isHidden }.flatMap { chains(chain + [$0]) }
  }

  /// The page of the last command of `chain`.
  package static func roff(_ chain: [Command]) -> String {
    let command = chain.last!
    let page = name(chain)
    var out = """
      .TH "\(page.uppercased())" "1" "" "protfs \(ProtFSVersion.current)" "protfs Manual"
      .SH NAME
      \(escape(page)) \\- \(escape(command.abstract))
      .SH SYNOPSIS
      \(escape(Help.usage(chain)))

      """
    if let discussion = command.discussion {
      out += ".SH DESCRIPTION\n" + paragraphs(discussion)
    }
    out += arguments(command) + options(chain)
    let visible = command.subcommands.filter { !$0.isHidden }
    if !visible.isEmpty {
      out += ".SH COMMANDS\n"
      for sub in visible {
        out += ".TP\n\\fB\(escape(name(chain + [sub])))\\fR(1)\n\(escape(sub.abstract))\n"
      }
    }
    let examples = CommandExamples.of(chain.map(\.name).joined(separator: " "))
    if !examples.isEmpty {
      out += ".SH EXAMPLES\n.nf\n" + examples.map(escape).joined(separator: "\n") + "\n.fi\n"
    }
    out +=
      ".SH EXIT STATUS\n0 on success, 1 on a runtime error, 64 on a usage error, unless the description above says more.\n"
    var related = chain.count > 1 ? [name(Array(chain.dropLast()))] : []
    related += visible.map { name(chain + [$0]) }
    if !related.isEmpty {
      out += ".SH SEE ALSO\n" + related.map { "\\fB\(escape($0))\\fR(1)" }.joined(separator: ", ") + "\n"
    }
    return out
  }

  /// The discussion's paragraphs (separated by blank lines) as roff: a paragraph that is one
  /// upper-case line is a subsection heading, and indented lines are shown as they are written,
  /// also inside a paragraph (filled, a long path there overflows the line and groff warns).
  static func paragraphs(_ text: String) -> String {
    var out = ""
    var first = true
    for paragraph in text.components(separatedBy: "\n\n") {
      var lines = paragraph.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
      guard !lines.isEmpty else { continue }
      if let heading = lines.first, heading == heading.uppercased(), heading.contains(where: \.isLetter),
        !heading.hasPrefix(" ")
      {
        out += ".SS \(escape(heading))\n"
        lines.removeFirst()
        first = true
        if lines.isEmpty { continue }
      }
      if !first { out += ".PP\n" }
      first = false
      var verbatim = false
      for line in lines {
        let indented = line.hasPrefix("  ") || (line.isEmpty && verbatim)
        if indented != verbatim { out += indented ? ".nf\n" : ".fi\n" }
        verbatim = indented
        out += escape(indented ? String(line.dropFirst(2)) : line) + "\n"
      }
      if verbatim { out += ".fi\n" }
    }
    return out
  }

  /// `text` safe as roff text: backslashes escaped, hyphens as `\-` (so they stay hyphens a user
  /// can copy), and a line never starting with a control character.
  static func escape(_ text: String) -> String {
    var escaped = ""
    for scalar in text.unicodeScalars {
      switch scalar {
      case "\\": escaped += "\\e"
      case "-": escaped += "\\-"
      case _ where scalar.isASCII: escaped.unicodeScalars.append(scalar)
      // Anything else by its code point, which groff renders on every device.
      default: escaped += "\\[u" + String(format: "%04X", scalar.value) + "]"
      }
    }
    if escaped.hasPrefix(".") || escaped.hasPrefix("'") { escaped = "\\&" + escaped }
    return escaped
  }
}
