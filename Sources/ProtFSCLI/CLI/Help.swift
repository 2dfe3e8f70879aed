/// Generates OVERVIEW / USAGE / ARGUMENTS / OPTIONS / SUBCOMMANDS text from command descriptions.
package enum Help {
  /// The one-line usage of the last command of `chain`, for example `protfs ls [<path>] [-R] [--json]`.
  package static func usage(_ chain: [Command]) -> String {
    let command = chain.last!
    var parts = [chain.map(\.name).joined(separator: " ")]
    if !command.subcommands.isEmpty && command.run == nil {
      parts.append("<subcommand>")
    } else {
      if !command.subcommands.isEmpty { parts.append("[<subcommand>]") }
      for argument in command.arguments {
        switch argument.arity {
        case .required: parts.append("<\(argument.name)>")
        case .optional: parts.append("[<\(argument.name)>]")
        case .zeroOrMore: parts.append("[<\(argument.name)> ...]")
        case .oneOrMore: parts.append("<\(argument.name)> ...")
        }
      }
      for option in command.options {
        let name = option.short.map { "-\($0)" } ?? "--\(option.long)"
        let shown = option.isFlag ? name : "\(name) <\(option.valueName!)>"
        parts.append(option.isRequired ? shown : "[\(shown)]")
      }
      if command.takesTrailingCommand {
        parts.append(
          command.trailingCommandIsOptional ? "[-- <command> [<argument> ...]]" : "-- <command> [<argument> ...]")
      }
    }
    return parts.joined(separator: " ")
  }

  /// The whole help of the last command of `chain`, as `--help` prints it.
  package static func text(_ chain: [Command]) -> String {
    let command = chain.last!
    var out = "OVERVIEW: \(command.abstract)\n"
    if let discussion = command.discussion { out += "\n" + discussion + "\n" }
    out += "\nUSAGE: \(usage(chain))\n"
    if !command.arguments.isEmpty {
      out += "\nARGUMENTS:\n"
      for argument in command.arguments {
        let label = "<\(argument.name)>" + (argument.arity == .zeroOrMore || argument.arity == .oneOrMore ? " ..." : "")
        out += row(label, argument.help)
      }
    }
    out += "\nOPTIONS:\n"
    for option in command.acceptedOptions(isTop: chain.count == 1) {
      var label = option.short.map { "-\($0), " } ?? ""
      label += "--\(option.long)"
      if let value = option.valueName { label += " <\(value)>" }
      out += row(label, option.help)
    }
    let visible = command.subcommands.filter { !$0.isHidden }
    if !visible.isEmpty {
      out += "\nSUBCOMMANDS:\n"
      for sub in visible { out += row(sub.name, sub.abstract) }
      out += "\n  See '\(chain.map(\.name).joined(separator: " ")) help <subcommand>' for detailed help.\n"
    }
    out += CommandExamples.text(chain.map(\.name).joined(separator: " "))
    return out
  }

  /// One row of a list: the label, padded to the help column, then the help.
  private static func row(_ label: String, _ help: String) -> String {
    let width = 26
    if label.count + 2 < width {
      return "  " + label + String(repeating: " ", count: width - 2 - label.count) + help + "\n"
    }
    return "  " + label + "\n" + String(repeating: " ", count: width) + help + "\n"
  }
}
