import ProtFSSystem

/// A path inside a device, as the components below the device root (empty for the root itself).
///
/// A `DevicePath` never holds `.`, `..` or empty components, so it cannot name anything outside the
/// device by itself; opening it walks the components with `O_NOFOLLOW`, so no symlink is followed either.
///
/// The components are names as the kernel has them (`FileName`), so a path whose names are not
/// UTF-8 names the items it was made from; `components` gives them as text, for comparing with the
/// names protfs makes and for showing.
public struct DevicePath: Hashable, Sendable, Comparable, CustomStringConvertible {
  /// The components below the device root, as the kernel names them.
  public private(set) var names: [FileName]

  /// The device root.
  public static let root = DevicePath(names: [])

  package init(validated components: [String]) { names = components.map(FileName.init) }

  /// The path of `names`, each a single component (no `/`, not empty, `.` or `..`).
  package init(names: [FileName]) { self.names = names }

  /// Parses a relative path such as `Containers/com.example.app/Documents`, rejecting `..`.
  public init(_ relative: String) throws(ProtFSError) {
    try self.init(bytes: Array(relative.utf8))
  }

  /// Parses a relative path given as bytes (UTF-8 or not), rejecting `..`.
  public init(bytes relative: [UInt8]) throws(ProtFSError) {
    var parts: [FileName] = []
    for part in relative.split(separator: UInt8(ascii: "/")) where part.elementsEqual(".".utf8) == false {
      if part.elementsEqual("..".utf8) {
        let shown = DisplayText.escaping(relative)
        throw ProtFSError(.outsideDevice, "The path '\(shown)' must not contain '..'.", path: shown)
      }
      parts.append(FileName(bytes: part))
    }
    names = parts
  }

  /// The components as text: each name as it is when it is UTF-8, shown escaped (`\xFF`) when not.
  /// For comparing with known names and for messages; open items through `names`.
  public var components: [String] { names.map(Self.text) }

  /// The last component as text (`components`), or nil for the root.
  public var name: String? { names.last.map(Self.text) }

  /// `name` as text: itself when UTF-8, else escaped.
  private static func text(_ name: FileName) -> String { name.text ?? name.description }

  /// The last component, or nil for the root.
  public var fileName: FileName? { names.last }

  /// How many components there are.
  public var count: Int { names.count }

  /// The parent path; the root's parent is the root.
  public var parent: DevicePath { DevicePath(names: Array(names.dropLast())) }

  /// Whether this is the device root.
  public var isRoot: Bool { names.isEmpty }

  /// This path with `name` appended; `name` must be a single component.
  public func appending(_ name: String) -> DevicePath {
    precondition(!name.isEmpty && !name.contains("/") && name != "." && name != "..", "not a single component: \(name)")
    return DevicePath(names: names + [FileName(name)])
  }

  /// This path with the entry `name` (which may not be UTF-8) appended; a single component.
  public func appending(_ name: FileName) -> DevicePath {
    precondition(
      !name.bytes.isEmpty && !name.bytes.contains(UInt8(ascii: "/")) && name.bytes != [0x2E]
        && name.bytes != [0x2E, 0x2E],
      "not a single component: \(name)")
    return DevicePath(names: names + [name])
  }

  /// This path with each of the `/`-separated components of `relative` appended.
  public func appending(path relative: String) throws(ProtFSError) -> DevicePath {
    DevicePath(names: names + (try DevicePath(relative)).names)
  }

  /// Whether `self` is `other` or lies below it.
  public func hasPrefix(_ other: DevicePath) -> Bool { names.starts(with: other.names) }

  /// The components after `prefix`, joined by `/` (as text, `components`).
  public func relative(to prefix: DevicePath) -> String {
    components.dropFirst(prefix.names.count).joined(separator: "/")
  }

  /// The path relative to the device root, `.` for the root (as text, `components`).
  public var description: String { names.isEmpty ? "." : components.joined(separator: "/") }

  /// Orders component by component, byte by byte.
  public static func < (lhs: DevicePath, rhs: DevicePath) -> Bool {
    lhs.names.lexicographicallyPrecedes(rhs.names)
  }
}
