/// The command reference in Markdown (`docs/cli.md`), generated from the same description as
/// `--help` and the manual pages: `protfs help --markdown` prints it, `scripts/cli-doc.sh` writes it,
/// and a test fails when the file in the repository is not what the binary prints.
package enum CommandReference {
  /// The widest line the reference writes; a word longer than that keeps its own line.
  static let width = 100

  /// The whole reference: common options, a list of every visible command, then one section each.
  package static func markdown() -> String {
    let chains = ManualPage.chains()
    var out = """
      # Command reference

      Generated from protfs's command tree by `bash scripts/cli-doc.sh` (`protfs help --markdown`), as
      `--help` and the manual pages are: change a command's declaration in `Sources/ProtFSCLI`, then
      run the script, rather than editing this file.


      """
    out += "Every command also takes these options:\n\n"
    for option in [CommonOptions.device, CommonOptions.help] { out += item(label(option), option.help) + "\n" }
    out += item(label(CommonOptions.version) + " (`protfs` only)", CommonOptions.version.help) + "\n"
    out += "\n" + wrap(exitStatus) + "\n\n## Commands\n\n"
    for chain in chains.dropFirst() {
      let indent = String(repeating: "  ", count: chain.count - 2)
      let link = "[`\(words(chain))`](#\(anchor(chain)))"
      out += wrap("- \(link): \(escape(chain.last!.abstract))", indent: indent, hanging: indent + "  ") + "\n"
    }
    for chain in chains { out += "\n" + section(chain) }
    return out
  }

  /// What `ManualPage` says under EXIT STATUS, for every command.
  static let exitStatus =
    "Exit status: 0 on success, 1 on a runtime error, 64 on a usage error, unless a command's description says more."

  /// The section of the last command of `chain`: its blocks, one blank line between them.
  static func section(_ chain: [Command]) -> String {
    let command = chain.last!
    var blocks = ["## \(words(chain))", wrap(escape(command.abstract)), "```text\n" + usage(chain) + "\n```"]
    if let discussion = command.discussion { blocks += paragraphs(discussion) }
    if !command.arguments.isEmpty {
      blocks.append("**Arguments**")
      blocks.append(
        command.arguments.map { item("`<\($0.name)>`" + ($0.isVariadic ? " ..." : ""), $0.help) }.joined(
          separator: "\n"))
    }
    let options = command.options + (command.takesBundleID ? [CommonOptions.bundleID] : [])
    if !options.isEmpty {
      blocks.append("**Options**")
      blocks.append(options.map { item(label($0), $0.help) }.joined(separator: "\n"))
    }
    let visible = command.subcommands.filter { !$0.isHidden }
    if !visible.isEmpty {
      blocks.append("**Subcommands**")
      blocks.append(
        visible.map { item("[`\($0.name)`](#\(anchor(chain + [$0])))", $0.abstract) }.joined(separator: "\n"))
    }
    let examples = CommandExamples.of(words(chain))
    if !examples.isEmpty { blocks += ["**Examples**", "```sh\n" + examples.joined(separator: "\n") + "\n```"] }
    return blocks.joined(separator: "\n\n") + "\n"
  }

  /// The usage line, wrapped between its parts (a bracketed option stays whole), the rest indented.
  static func usage(_ chain: [Command]) -> String {
    var parts: [String] = []
    var part = ""
    var depth = 0
    for character in Help.usage(chain) {
      if character == "[" { depth += 1 }
      if character == "]" { depth -= 1 }
      if character == " " && depth == 0 {
        parts.append(part)
        part = ""
      } else {
        part.append(character)
      }
    }
    parts.append(part)
    var lines = [parts[0]]
    for part in parts.dropFirst() {
      if lines[lines.count - 1].count + 1 + part.count <= width {
        lines[lines.count - 1] += " " + part
      } else {
        lines.append("    " + part)
      }
    }
    return lines.joined(separator: "\n")
  }

  /// `protfs app launch`.
  static func words(_ chain: [Command]) -> String { chain.map(\.name).joined(separator: " ") }

  /// The heading's anchor as GitHub makes it: `protfs-app-launch`.
  static func anchor(_ chain: [Command]) -> String { chain.map(\.name).joined(separator: "-") }

  /// `` `-r`, `--recursive` `` or `` `--to <dir>` ``.
  static func label(_ option: Option) -> String {
    let long = "`--\(option.long)" + (option.valueName.map { " <\($0)>" } ?? "") + "`"
    return option.short.map { "`-\($0)`, " + long } ?? long
  }

  /// One list item: the label, then the help, wrapped under it.
  static func item(_ label: String, _ help: String) -> String {
    wrap("- \(label): \(escape(help))", hanging: "  ")
  }

  /// A discussion's paragraphs (separated by blank lines) as Markdown blocks: prose wrapped,
  /// indented lines as a code block, a paragraph's first line in upper case as a bold heading.
  static func paragraphs(_ text: String) -> [String] {
    var blocks: [String] = []
    for paragraph in text.components(separatedBy: "\n\n") {
      var lines = paragraph.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
      if let heading = lines.first, heading == heading.uppercased(), heading.contains(where: \.isLetter),
        !heading.hasPrefix(" ")
      {
        blocks.append("**\(escape(heading))**")
        lines.removeFirst()
      }
      // Runs of prose and of indented lines, in order.
      var prose: [String] = []
      var verbatim: [String] = []
      func flush() {
        if !prose.isEmpty { blocks.append(wrap(escape(prose.joined(separator: " ")))) }
        if !verbatim.isEmpty { blocks.append("```text\n" + verbatim.joined(separator: "\n") + "\n```") }
        prose = []
        verbatim = []
      }
      for line in lines {
        if line.hasPrefix("  ") {
          if !prose.isEmpty { flush() }
          verbatim.append(String(line.dropFirst(2)))
        } else if !line.isEmpty {
          if !verbatim.isEmpty { flush() }
          prose.append(line)
        }
      }
      flush()
    }
    return blocks
  }

  /// `text` as Markdown text: outside code spans, backslashes, `*`, `<`, `[`, `]` and word-edge
  /// underscores are escaped, so that `<bundle-id>` or `Downloads/*.tmp` show as they are written.
  static func escape(_ text: String) -> String {
    guard text.filter({ $0 == "`" }).count.isMultiple(of: 2) else { return escapeText(text) }
    return text.split(separator: "`", omittingEmptySubsequences: false).enumerated().map { index, part in
      index.isMultiple(of: 2) ? escapeText(String(part)) : String(part)
    }.joined(separator: "`")
  }

  private static func escapeText(_ text: String) -> String {
    let characters = Array(text)
    var out = ""
    for (index, character) in characters.enumerated() {
      switch character {
      case "\\", "*", "<", "[", "]", "`": out += "\\" + String(character)
      case "_":
        let before = index > 0 && (characters[index - 1].isLetter || characters[index - 1].isNumber)
        let after =
          index + 1 < characters.count && (characters[index + 1].isLetter || characters[index + 1].isNumber)
        out += before && after ? "_" : "\\_"
      default: out.append(character)
      }
    }
    return out
  }

  /// `text` wrapped at `width`: the first line after `indent`, the others after `hanging`. A word
  /// that Markdown would read as the start of a block at the start of a line (`-`, `+`, `#`, `>`,
  /// `1.`, `===`) is kept on the line before it.
  static func wrap(_ text: String, indent: String = "", hanging: String = "") -> String {
    var lines: [String] = []
    var line = indent
    var lineHasWord = false
    for word in text.split(separator: " ") {
      let fits = line.count + 1 + word.count <= width
      if lineHasWord && !fits && !startsABlock(word) {
        lines.append(line)
        line = hanging + word
      } else {
        line += (lineHasWord ? " " : "") + word
      }
      lineHasWord = true
    }
    lines.append(line)
    return lines.joined(separator: "\n")
  }

  private static func startsABlock(_ word: Substring) -> Bool {
    if word.first == "#" || word.first == ">" || word.first == "|" { return true }
    if ["-", "+", "*"].contains(word) || word.allSatisfy({ $0 == "=" || $0 == "-" }) { return true }
    if let last = word.last, last == "." || last == ")", word.dropLast().allSatisfy(\.isNumber) { return true }
    return false
  }
}
