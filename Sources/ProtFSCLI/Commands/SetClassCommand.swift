import ProtFS

/// `protfs set-class [--bundle ID] CLASS PATH...`.
package enum SetClassCommand {
  package static let command = Command(
    name: "set-class",
    abstract: "Set the protection class of files and directories.",
    discussion: """
      Writes CLASS into the item's user.protfs.class attribute. Changing a directory's class does
      not relabel what is already inside it unless --recursive is given; items created later
      inherit it. Symbolic links are never followed.

      A relative PATH is read from the current directory, or with --bundle from the app's
      container (Documents/notes.txt), which it must not leave; an absolute PATH from anywhere.
      """,
    arguments: [protectionClass, GetClassCommand.path],
    options: [recursive, CommonOptions.follow, CommonOptions.bundle],
    run: run
  )

  /// `<class>`.
  package static let protectionClass = Argument(
    name: "class", help: "none, complete, complete-unless-open, until-first-auth, when-inactive, …")
  /// `--recursive`, `-r`.
  package static let recursive = Option.flag(
    "recursive", short: "r", help: "Also set the class of everything below each directory.")

  package static func run(_ invocation: Invocation) throws -> Int32 {
    let protectionClass = try invocation.protectionClass(invocation.required(Self.protectionClass))
    let device = invocation.device
    try device.requireInitialized()
    let base = try Paths.base(invocation, on: device)
    // Resolve every path before changing anything, so one bad path changes nothing.
    let paths = try invocation.arguments(GetClassCommand.path).map {
      try (Paths.item($0, from: base, on: device, follow: invocation.flag(CommonOptions.follow)).0, $0)
    }
    for (path, shown) in paths {
      let result = try device.setClass(protectionClass, of: path, recursive: invocation.flag(Self.recursive))
      for skipped in result.skipped {
        Console.err("note: left \(device.absolutePath(skipped)) alone: symbolic links and special files have no class.")
      }
      if invocation.flag(Self.recursive) {
        Console.err(
          "Set \(protectionClass.name) on \(result.changed) item\(result.changed == 1 ? "" : "s") under \(shown).")
      }
    }
    return 0
  }
}
