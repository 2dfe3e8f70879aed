import ProtFS

/// `protfs get-class PATH...`.
enum GetClassCommand {
  static let command = Command(
    name: "get-class",
    abstract: "Show the effective protection class of items and where it comes from.",
    discussion: """
      Prints one line per item: the raw value (as iOS names it), the source (own: the item's own
      attribute; inherited: the nearest ancestor directory's; default: the container's default),
      and the path.
      """,
    arguments: [Argument(name: "path", help: "Items inside the device.", arity: .oneOrMore)],
    options: [
      .flag("json", help: "Print a JSON array of {path, class, name, source}."),
      .flag("follow", short: "L", help: "Follow symbolic links (never out of the device)."),
    ],
    run: run
  )

  struct Row: Encodable {
    var path: String
    var `class`: String
    var name: String
    var source: String
  }

  static func run(_ invocation: Invocation) throws -> Int32 {
    let device = invocation.device
    try device.requireInitialized()
    var rows: [Row] = []
    for shown in invocation.arguments("path") {
      let path = try Paths.item(shown, on: device, follow: invocation.flag("follow"))
      let effective = try device.effectiveClass(of: path)
      rows.append(
        Row(
          path: shown, class: effective.protectionClass.rawValue, name: effective.protectionClass.name,
          source: effective.source.rawValue))
    }
    if invocation.flag("json") {
      try Console.json(rows)
    } else {
      let width = rows.map(\.class.count).max() ?? 0
      for row in rows {
        let padded = row.class + String(repeating: " ", count: width - row.class.count)
        let source = row.source + String(repeating: " ", count: 9 - row.source.count)
        Console.out("\(padded)  \(source)  \(row.path)")
      }
    }
    return 0
  }
}
