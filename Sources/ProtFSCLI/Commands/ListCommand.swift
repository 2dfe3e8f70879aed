import Foundation
import ProtFS
import ProtFSSystem

/// `protfs ls [--recursive] PATH`: one row per item, as objection's `ls` shows an app's files.
package enum ListCommand {
  package static let command = Command(
    name: "ls",
    abstract: "List a directory with each item's protection class, source, mode and size.",
    discussion: """
      With --json: an array of items, each with path, kind, mode and size, and class, name and
      source (files and directories) or target (symbolic links).
      """,
    arguments: [path],
    options: [recursive, CommonOptions.json],
    run: run
  )

  /// `[<path>]`.
  package static let path = Argument(
    name: "path", help: "A directory inside the device (default: the device).", arity: .optional)
  /// `--recursive`, `-R`.
  package static let recursive = Option.flag("recursive", short: "R", help: "List everything below the directory.")

  package struct Row: Encodable {
    var path: String
    var kind: String
    var `class`: String?
    var name: String?
    var source: String?
    var mode: String
    var size: Int64
    var target: String?
  }

  package static func run(_ invocation: Invocation) throws -> Int32 {
    let device = invocation.device
    try device.requireInitialized()
    let shown = invocation.argument(Self.path) ?? device.root
    let start = try device.resolve(shown)
    let status = try device.status(start)
    var rows: [Row] = []
    if status.kind != .directory {
      rows.append(try row(device, start, display: start.name ?? ".", status: status))
    } else {
      let inherited = try device.effectiveClass(of: start)
      try list(
        device, try device.openDirectory(start), start, prefix: "", inherited: inherited,
        recursive: invocation.flag(Self.recursive), into: &rows)
    }
    if invocation.flag(CommonOptions.json) {
      try Console.json(rows)
      return 0
    }
    var table = [["CLASS", "SOURCE", "MODE", "SIZE", "NAME"]]
    for r in rows {
      var name = r.path + (r.kind == "directory" ? "/" : "")
      if let target = r.target { name += " -> \(target)" }
      table.append([r.name ?? "-", r.source ?? "-", r.mode, String(r.size), name])
    }
    Console.table(table, right: [3])
    return 0
  }

  private static func list(
    _ device: Device, _ directory: DirectoryHandle, _ path: DevicePath, prefix: String,
    inherited: EffectiveClass, recursive: Bool, into rows: inout [Row]
  ) throws {
    let own = try directory.protectionClass()
    let here = own.map { EffectiveClass($0, .own) } ?? inherited
    let forChildren =
      here.source == .default ? here : EffectiveClass(here.protectionClass, .inherited)
    var defaultHere = forChildren
    if path.components.count == 2, path.components[0] == Device.containersDirectoryName,
      let containerDefault = try directory.defaultClass(), own == nil, here.source == .default
    {
      defaultHere = EffectiveClass(containerDefault, .default)
    }
    let entries = try directory.entries().sorted { $0.name < $1.name }
    for (name, _) in entries {
      if path.isRoot && name == Device.stateDirectoryName { continue }
      let status = try directory.status(name)
      let display = prefix + name
      var r = Row(
        path: display, kind: status.kind.rawValue, mode: status.permissions.description, size: status.size)
      switch status.kind {
      case .symlink:
        r.target = readLink(directory, name)
      case .file, .directory:
        let effective = try directory.protectionClass(of: name).map { EffectiveClass($0, .own) } ?? defaultHere
        r.class = effective.protectionClass.rawValue
        r.name = effective.protectionClass.name
        r.source = effective.source.rawValue
      default:
        break
      }
      rows.append(r)
      if recursive && status.kind == .directory {
        try list(
          device, try directory.openDirectory(name), path.appending(name), prefix: display + "/",
          inherited: defaultHere, recursive: true, into: &rows)
      }
    }
  }

  private static func readLink(_ directory: DirectoryHandle, _ name: String) -> String {
    var buffer = [CChar](repeating: 0, count: 4097)
    let count = readlinkat(directory.fd, name, &buffer, 4096)
    guard count >= 0 else { return "?" }
    return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }

  private static func row(_ device: Device, _ path: DevicePath, display: String, status: FileStatus) throws -> Row {
    let effective = try device.effectiveClass(of: path)
    return Row(
      path: display, kind: status.kind.rawValue, class: effective.protectionClass.rawValue,
      name: effective.protectionClass.name, source: effective.source.rawValue, mode: status.permissions.description,
      size: status.size)
  }
}
