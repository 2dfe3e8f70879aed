import Foundation
import ProtFS
import ProtFSSystem

/// `protfs ls [--recursive] [--bundle ID] [PATH]`: one row per item, as objection's `ls` shows an app's files.
package enum ListCommand {
  package static let command = Command(
    name: "ls",
    abstract: "List a directory with each item's protection class, source, mode and size.",
    discussion: """
      With --json: an array of items, each with path, kind, mode and size, and className,
      classRawValue and source (files and directories) or target (symbolic links): the keys
      get-class and status use for the same things.

      A relative PATH is read from the current directory, or with --bundle from the app's
      container, which it must not leave (no PATH: the container); an absolute PATH from anywhere.
      Without PATH or --bundle, ls lists the current directory, as ls(1) does, when that is inside
      the device, and the device's root from anywhere else.
      """,
    arguments: [path],
    options: [recursive, CommonOptions.json, CommonOptions.bundle],
    run: run
  )

  /// `[<path>]`.
  package static let path = Argument(
    name: "path",
    help:
      "A directory inside the device (default: the current directory inside the device, else the device; with --bundle, the container).",
    arity: .optional)
  /// `--recursive`, `-R`.
  package static let recursive = Option.flag("recursive", short: "R", help: "List everything below the directory.")

  /// Whether `directory` (absolute) is the device's root or below it, as written or with its links
  /// resolved: where `ls` without a PATH lists `directory` rather than the root.
  private static func isInside(_ directory: String, _ device: Device) -> Bool {
    [device.root, device.canonicalRoot].contains { root in
      directory == root || directory.hasPrefix(root == "/" ? "/" : root + "/")
    }
  }

  /// One listed item; its keys name what `get-class` and `status` name alike.
  package struct Row: Encodable {
    /// The path below the listed directory.
    var path: String
    /// file, directory, symlink, …
    var kind: String
    /// The effective class's protfs name (`complete`); nil for a symbolic link or special file.
    var className: String?
    /// The effective class's raw value (`NSFileProtectionComplete`).
    var classRawValue: String?
    /// own, inherited or default.
    var source: String?
    /// The permission bits, as `ls -l` shows them.
    var mode: String
    /// The size in bytes.
    var size: Int64
    /// A symbolic link's target.
    var target: String?
  }

  package static func run(_ invocation: Invocation) throws -> Int32 {
    let device = invocation.device
    try device.requireInitialized()
    let base = try Paths.base(invocation, on: device)
    // The path as its bytes: a name that is not UTF-8 is read as it is.
    let given: [UInt8]
    switch base {
    case .container(let container):
      given = invocation.argumentByteValue(Self.path) ?? Array(container.absolutePath.utf8)
    case .currentDirectory(let directory):
      given = invocation.argumentByteValue(Self.path) ?? Array((isInside(directory, device) ? "." : device.root).utf8)
    }
    let rows = try Self.rows(device, given: given, from: base, recursive: invocation.flag(Self.recursive))
    if invocation.flag(CommonOptions.json) {
      try Console.json(rows)
      return 0
    }
    var table = [["CLASS", "SOURCE", "MODE", "SIZE", "NAME"]]
    for r in rows {
      var name = r.path + (r.kind == "directory" ? "/" : "")
      if let target = r.target { name += " -> \(target)" }
      table.append([r.className ?? "-", r.source ?? "-", r.mode, String(r.size), name])
    }
    Console.table(table, right: [3])
    return 0
  }

  /// The rows of the item `given` names from `base`: its own, or a directory's entries (its tree
  /// with `recursive`), each directory's subtree right after its own row.
  static func rows(_ device: Device, given: [UInt8], from base: Paths.Base, recursive: Bool) throws -> [Row] {
    let (start, status) = try Paths.existing(bytes: given, from: base, on: device)
    guard status.kind == .directory else {
      return [try row(device, start, display: start.fileName?.description ?? ".", status: status)]
    }
    let root = TreeWalker.Root(
      try device.openDirectory(start), ListVisitor.Place(path: start, prefix: ""),
      inheritance: try device.classInheritance(below: start))
    let (visitors, _) = TreeWalker(threads: 1).walk(
      [root], visitor: ListVisitor(recursive: recursive))
    if let error = visitors[0].error { throw error }
    // Each directory's entries by name, each directory's subtree right after its own row.
    return visitors[0].rows.sorted {
      $0.path.split(separator: "/").lexicographicallyPrecedes($1.path.split(separator: "/"))
    }
  }

  /// The target of the link `name` of `directory`, shown escaped as names are.
  package static func readLink(_ directory: DirectoryHandle, _ name: FileName) -> String {
    var buffer = [CChar](repeating: 0, count: 4097)
    let cName = name.cString
    guard case .success(let count) = Kernel.readlinkat(directory.fd, cName, &buffer, 4096) else {
      return "?"
    }
    return DisplayText.escaping(buffer[0..<count].map { UInt8(bitPattern: $0) })
  }

  private static func row(_ device: Device, _ path: DevicePath, display: String, status: FileStatus) throws -> Row {
    let effective = try device.effectiveClass(of: path)
    return Row(
      path: display, kind: status.kind.rawValue, className: effective.protectionClass.name,
      classRawValue: effective.protectionClass.rawValue, source: effective.source.rawValue,
      mode: status.permissions.description,
      size: status.size)
  }
}

/// The walk behind `ls`: one row per item, its class from the walk's inheritance, stopping at the
/// first error. Its context is the directory's device path and the prefix of its rows' paths.
private struct ListVisitor: TreeVisitor {
  /// A directory being listed.
  struct Place: Sendable {
    /// The directory's device path.
    var path: DevicePath
    /// What its rows' paths start with.
    var prefix: String
  }
  /// Whether to list below the first directory.
  let recursive: Bool
  /// The rows, in walk order.
  var rows: [ListCommand.Row] = []
  /// The first error, which stopped the walk.
  var error: ProtFSError?

  /// A visitor for `ls`, or `ls -R` when `recursive`.
  init(recursive: Bool) { self.recursive = recursive }

  /// Makes the entry's row; walks a directory when recursive.
  mutating func visit(_ entry: inout TreeEntry, in place: Place) -> TreeStep<Place> {
    // The name as the kernel has it, shown escaped (`\xFF`) when it is not UTF-8.
    let name = entry.fileName
    if place.path.isRoot && name == FileName(Device.stateDirectoryName) { return .skip }
    do throws(ProtFSError) {
      let status = try entry.directory.status(name)
      let display = place.prefix + name.description
      var row = ListCommand.Row(
        path: display, kind: status.kind.rawValue, mode: status.permissions.description, size: status.size)
      switch status.kind {
      case .symlink:
        row.target = ListCommand.readLink(entry.directory, name)
      case .file, .directory:
        if status.kind == .directory && Device.isContainerRoot(place.path.appending(name)) {
          try entry.readContainerDefault()
        }
        entry.ownClass = try entry.directory.protectionClass(of: name)
        let effective = entry.effectiveClass
        row.className = effective.protectionClass.name
        row.classRawValue = effective.protectionClass.rawValue
        row.source = effective.source.rawValue
      default:
        break
      }
      rows.append(row)
      guard recursive && status.kind == .directory else { return .skip }
      return .descend(Place(path: place.path.appending(name), prefix: display + "/"))
    } catch {
      self.error = error
      return .stop
    }
  }

  /// Records the error and stops.
  mutating func failed(_ error: ProtFSError, in place: Place) -> Bool {
    self.error = error
    return false
  }
}
