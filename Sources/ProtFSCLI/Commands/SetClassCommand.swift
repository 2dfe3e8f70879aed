import ProtFS
import ProtFSLock
import ProtFSSystem

/// `protfs set-class [--bundle ID] CLASS PATH...`.
package enum SetClassCommand {
  package static let command = Command(
    name: "set-class",
    abstract: "Set the protection class of files and directories.",
    discussion: """
      Writes CLASS into the item's user.protfs.class attribute. Changing a directory's class does
      not relabel what is already inside it unless --recursive is given; items created later
      inherit it. Symbolic links are never followed. On a sealed device the key of every file
      whose class changes (those below a directory that inherit its class too) is wrapped anew
      with the new class's key, contents untouched; a change that needs a class key the lock
      evicted is refused (Operation not permitted) and changes nothing.

      A relative PATH is read from the current directory, or with --bundle from the app's
      container (Documents/notes.txt), which it must not leave; an absolute PATH from anywhere.
      A PATH is taken as the bytes it was given as, so a file name that is not UTF-8 is labelled
      like any other; messages show such a name's other bytes as \\xNN, as ls and audit do.

      With --json: one object with className and classRawValue (the class set, keyed as ls and
      get-class key a class), recursive, and items: per PATH its path (as given, escaped as
      above), changed (how many items got the class) and skipped (the symbolic links and special
      files below it that were left alone, absolute).
      """,
    arguments: [protectionClass, GetClassCommand.path],
    options: [recursive, CommonOptions.follow, CommonOptions.bundle, CommonOptions.json],
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
    // Resolve every path before changing anything, so one bad path changes nothing. The paths
    // are the argument's bytes: a name that is not UTF-8 reaches the system call as it is.
    let paths = try invocation.argumentBytes(GetClassCommand.path).map { given in
      let (path, _) = try Paths.item(
        bytes: given, from: base, on: device, follow: invocation.flag(CommonOptions.follow))
      return (path, DisplayText.escaping(given))
    }
    let recursive = invocation.flag(Self.recursive)
    var items: [Item] = []
    for (path, shown) in paths {
      let result = try invocation.lockController.setClass(protectionClass, of: path, recursive: recursive)
      for skipped in result.skipped {
        Console.err("note: left \(device.absolutePath(skipped)) alone: symbolic links and special files have no class.")
      }
      if recursive {
        Console.err(
          "Set \(protectionClass.name) on \(result.changed) item\(result.changed == 1 ? "" : "s") under \(shown).")
      }
      items.append(Item(path: shown, changed: result.changed, skipped: result.skipped.map(device.absolutePath)))
    }
    if invocation.flag(CommonOptions.json) {
      try Console.json(
        Outcome(
          className: protectionClass.name, classRawValue: protectionClass.rawValue, recursive: recursive,
          items: items))
    }
    return 0
  }

  /// What `set-class --json` prints.
  struct Outcome: Encodable {
    /// The class set, protfs's name.
    var className: String
    /// The class set, its raw value.
    var classRawValue: String
    /// Whether everything below each directory got it too.
    var recursive: Bool
    /// One per PATH, in the order given.
    var items: [Item]
  }

  /// What one PATH changed.
  struct Item: Encodable {
    /// The PATH as given (bytes that are not UTF-8 as `\xNN`).
    var path: String
    /// How many items got the class.
    var changed: Int
    /// The items below it left alone (symbolic links and special files), absolute.
    var skipped: [String]
  }
}
