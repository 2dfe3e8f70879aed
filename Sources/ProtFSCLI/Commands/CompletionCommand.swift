import Foundation
import ProtFS

/// `protfs completion bash|zsh|fish`: a shell completion script, generated from the command tree
/// the parser uses, so it never drifts from the commands.
package enum CompletionCommand {
  package static let command = Command(
    name: "completion",
    abstract: "Print a shell completion script for bash, zsh or fish.",
    discussion: """
      Completes subcommands, options, protection class names, the device's bundle ids (from the
      device --device or $PROTFS_DEVICE names) and paths where a command takes them (in bash,
      after --bundle ID, relative ones inside that app's container).
      """,
    arguments: [shell],
    run: run
  )

  /// `<shell>`.
  package static let shell = Argument(name: "shell", help: "bash, zsh or fish.")

  package static func run(_ invocation: Invocation) throws -> Int32 {
    let text = invocation.required(Self.shell)
    switch text {
    case "bash": Console.out(bash(), terminator: "")
    case "zsh": Console.out(zsh(), terminator: "")
    case "fish": Console.out(fish(), terminator: "")
    default:
      throw invocation.usageError("'\(text)' is not a shell protfs completes; use bash, zsh or fish.")
    }
    return 0
  }

  // MARK: The tree

  /// What a value or argument completes to.
  enum Kind: String {
    case directory, file, protectionClass, bundleID, none
  }

  /// The kind of values `option` takes.
  static func kind(of option: Option) -> Kind {
    switch option.valueName {
    case "dir": .directory
    case "file", "path": .file
    case "class": .protectionClass
    case "bundle-id": .bundleID
    default: .none
    }
  }

  /// The kind of values `argument` takes.
  static func kind(of argument: Argument) -> Kind {
    switch argument.name {
    case "class": .protectionClass
    case "bundle-id": .bundleID
    case "path", "file": .file
    case "mountpoint": .directory
    default: .none
    }
  }

  /// One command of the tree with the words that lead to it (`["protfs", "app", "launch"]`).
  struct Node {
    var path: [String]
    var command: Command
  }

  /// Every visible command, depth first.
  static func nodes(_ command: Command = Commands.root, path: [String] = ["protfs"]) -> [Node] {
    [Node(path: path, command: command)]
      + command.subcommands.filter { !$0.isHidden }.flatMap { nodes($0, path: path + [$0.name]) }
  }

  /// The options `node`'s command accepts, `--device` and `--help` included (`--version` at the top).
  static func options(of node: Node) -> [Option] { node.command.acceptedOptions(isTop: node.path.count == 1) }

  /// Every protection class spelling the command line takes.
  static var classNames: [String] {
    ProtectionClass.allCases.flatMap { [$0.name] + ($0.alias.map { [$0] } ?? []) }
  }

  // MARK: bash

  /// The bash script: a `_protfs` function and `complete -F _protfs protfs`.
  static func bash() -> String {
    let all = nodes()
    let valueOptions = Set(all.flatMap { options(of: $0) }.filter { !$0.isFlag }.flatMap(words))
    return
      bashScript
      .replacingOccurrences(of: "@CLASS_NAMES@", with: classNames.joined(separator: " "))
      .replacingOccurrences(of: "@VALUE_OPTIONS@", with: valueOptions.sorted().joined(separator: " "))
      .replacingOccurrences(of: "@CHOICES@", with: bashChoices(all))
      .replacingOccurrences(of: "@VALUES@", with: bashValues(all))
      .replacingOccurrences(of: "@NODES@", with: bashNodes(all))
  }

  /// The `_protfs_node` arms: each command's subcommands, options, argument kind and whether a
  /// command to run follows.
  static func bashNodes(_ all: [Node]) -> String {
    var cases = ""
    for node in all {
      let subcommands = node.command.subcommands.filter { !$0.isHidden }.map(\.name)
      let argument = node.command.arguments.first.map(kind(of:)) ?? .none
      cases += """
            "\(node.path.joined(separator: " "))")
              subcommands="\(subcommands.joined(separator: " "))"
              flags="\(options(of: node).flatMap(words).joined(separator: " "))"
              argument=\(argument.rawValue)
              trailing=\(node.command.takesTrailingCommand ? 1 : 0) ;;

        """
    }
    return cases
  }

  /// The arms for values of a fixed set (`audit --format`), per command: another command's option
  /// of the same name may take others.
  static func bashChoices(_ all: [Node]) -> String {
    var choices = ""
    for node in all {
      for option in options(of: node) where !option.choices.isEmpty {
        let offer = "COMPREPLY+=($(compgen -W \"\(option.choices.joined(separator: " "))\" -- \"$cur\"))"
        let files = kind(of: option) == .file ? "_protfs_paths -f; " : "COMPREPLY=(); "
        let keys = words(option).map { "\"\(node.path.joined(separator: " ")) \($0)\"" }.joined(separator: "|")
        choices += "    \(keys)) \(files)\(offer); return ;;\n"
      }
    }
    return choices
  }

  /// The arms for the values of options that take paths, classes or bundle ids, by kind.
  static func bashValues(_ all: [Node]) -> String {
    var values = ""
    let grouped = Dictionary(grouping: all.flatMap { options(of: $0) }.filter { !$0.isFlag }, by: kind(of:))
    for (kind, group) in grouped.sorted(by: { $0.key.rawValue < $1.key.rawValue }) where kind != .none {
      let names = Set(group.flatMap(words)).sorted()
      values += "    \(names.joined(separator: "|"))) _protfs_values \(kind.rawValue); return ;;\n"
    }
    return values
  }

  /// `--long` and `-s` of `option`.
  static func words(_ option: Option) -> [String] {
    ["--" + option.long] + (option.short.map { ["-\($0)"] } ?? [])
  }

  // MARK: zsh

  /// The zsh script: zsh's own bash completion layer running the bash script, so both shells
  /// complete alike.
  static func zsh() -> String {
    """
    #compdef protfs
    # zsh completion for protfs, made by `protfs completion zsh`: the bash completion, run by
    # zsh's bashcompinit.
    autoload -U +X bashcompinit && bashcompinit

    """ + bash() + """
      # Installed in $fpath (share/zsh/site-functions/_protfs), this file is the body of `_protfs`
      # that compinit calls for the first Tab, which the lines above only set up: complete it too.
      if [[ ${funcstack[1]-} == _protfs ]]; then _bash_complete -F _protfs; fi

      """
  }

  // MARK: fish

  /// The fish script: one `complete` line per subcommand and option, each under the condition
  /// that the words before it lead to its command.
  static func fish() -> String {
    var lines = [
      "# fish completion for protfs, made by `protfs completion fish` from its command tree.",
      "complete -c protfs -f",
    ]
    for node in nodes() {
      let condition = fishCondition(node)
      for sub in node.command.subcommands where !sub.isHidden {
        lines.append(
          "complete -c protfs -n \(quote(condition)) -a \(quote(sub.name)) -d \(quote(sub.abstract))")
      }
      for option in options(of: node) {
        var line = "complete -c protfs -n \(quote(condition)) -l \(option.long)"
        if let short = option.short { line += " -s \(short)" }
        if !option.isFlag && !option.choices.isEmpty {
          line +=
            " -r" + (kind(of: option) == .file ? " -F" : " -f") + " -a \(quote(option.choices.joined(separator: " ")))"
        } else if !option.isFlag {
          line += " -r" + fishValues(kind(of: option))
        }
        lines.append(line + " -d \(quote(option.help))")
      }
      if node.command.subcommands.isEmpty, let argument = node.command.arguments.first {
        let values = fishValues(kind(of: argument))
        if !values.isEmpty { lines.append("complete -c protfs -n \(quote(condition))\(values)") }
      }
    }
    return lines.joined(separator: "\n") + "\n"
  }

  /// The condition under which `node`'s words complete: its path was typed, and no deeper one.
  static func fishCondition(_ node: Node) -> String {
    let names = node.path.dropFirst()
    guard !names.isEmpty else { return "__fish_use_subcommand" }
    var parts = names.map { "__fish_seen_subcommand_from \($0)" }
    let deeper = node.command.subcommands.filter { !$0.isHidden }.map(\.name)
    if !deeper.isEmpty { parts.append("not __fish_seen_subcommand_from \(deeper.joined(separator: " "))") }
    return parts.joined(separator: "; and ")
  }

  /// fish's `-a`/`-F` for values of `kind`.
  static func fishValues(_ kind: Kind) -> String {
    switch kind {
    case .directory: " -a '(__fish_complete_directories)'"
    case .file: " -F"
    case .protectionClass: " -a \(quote(classNames.joined(separator: " ")))"
    case .bundleID:
      " -a '(ls (set -q PROTFS_DEVICE; and echo $PROTFS_DEVICE; or echo ~/.local/share/protfs/device)/Containers 2>/dev/null)'"
    case .none: ""
    }
  }

  /// `text` in single quotes for fish (a quote inside becomes `\'`).
  static func quote(_ text: String) -> String {
    "'" + text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "'", with: "\\'") + "'"
  }
}
