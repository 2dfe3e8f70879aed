import ProtFS
import ProtFSSystem

/// `protfs get-class [--bundle ID] PATH...`.
package enum GetClassCommand {
  package static let command = Command(
    name: "get-class",
    abstract: "Show the effective protection class of items and where it comes from.",
    discussion: """
      Prints one line per item: the raw value (as iOS names it), the source (own: the item's own
      attribute; inherited: the nearest ancestor directory's; default: the container's default),
      and the path. With --json: an array of {path, kind, className, classRawValue, source}, the
      keys ls and status use for the same things.

      A relative PATH is read from the current directory, or with --bundle from the app's
      container (Documents/notes.txt), which it must not leave; an absolute PATH from anywhere.
      """,
    arguments: [path],
    options: [CommonOptions.json, CommonOptions.follow, CommonOptions.bundle],
    run: run
  )

  /// `<path> ...`.
  package static let path = Argument(
    name: "path", help: "Items inside the device (relative: to the current directory, or the --bundle container).",
    arity: .oneOrMore)

  /// One item; its keys name what `ls` and `status` name alike.
  package struct Row: Encodable {
    /// The path as given.
    var path: String
    /// file or directory.
    var kind: String
    /// The effective class's protfs name (`complete`).
    var className: String
    /// The effective class's raw value (`NSFileProtectionComplete`), as the line shows it.
    var classRawValue: String
    /// own, inherited or default.
    var source: String
  }

  package static func run(_ invocation: Invocation) throws -> Int32 {
    let device = invocation.device
    try device.requireInitialized()
    let base = try Paths.base(invocation, on: device)
    var rows: [Row] = []
    // The paths as their bytes: a name that is not UTF-8 is read as it is, and shown escaped.
    for given in invocation.argumentBytes(Self.path) {
      let shown = DisplayText.escaping(given)
      let (path, status) = try Paths.item(
        bytes: given, from: base, on: device, follow: invocation.flag(CommonOptions.follow))
      let effective = try device.effectiveClass(of: path)
      rows.append(
        Row(
          path: shown, kind: status.kind.rawValue, className: effective.protectionClass.name,
          classRawValue: effective.protectionClass.rawValue, source: effective.source.rawValue))
    }
    if invocation.flag(CommonOptions.json) {
      try Console.json(rows)
    } else {
      let width = rows.map(\.classRawValue.count).max() ?? 0
      for row in rows {
        let padded = row.classRawValue + String(repeating: " ", count: width - row.classRawValue.count)
        let source = row.source + String(repeating: " ", count: 9 - row.source.count)
        Console.out("\(padded)  \(source)  \(row.path)")
      }
    }
    return 0
  }
}
