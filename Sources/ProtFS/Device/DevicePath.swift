import ProtFSSystem

/// A path inside a device, as the components below the device root (empty for the root itself).
///
/// A `DevicePath` never holds `.`, `..` or empty components, so it cannot name anything outside the
/// device by itself; opening it walks the components with `O_NOFOLLOW`, so no symlink is followed either.
public struct DevicePath: Hashable, Sendable, Comparable, CustomStringConvertible {
  /// The components below the device root.
  public private(set) var components: [String]

  /// The device root.
  public static let root = DevicePath(validated: [])

  package init(validated components: [String]) { self.components = components }

  /// Parses a relative path such as `Containers/com.example.app/Documents`, rejecting `..`.
  public init(_ relative: String) throws(ProtFSError) {
    var parts: [String] = []
    for part in relative.split(separator: "/") where part != "." {
      if part == ".." {
        throw ProtFSError(.outsideDevice, "The path '\(relative)' must not contain '..'.", path: relative)
      }
      parts.append(String(part))
    }
    components = parts
  }

  /// The last component, or nil for the root.
  public var name: String? { components.last }

  /// The parent path; the root's parent is the root.
  public var parent: DevicePath { DevicePath(validated: Array(components.dropLast())) }

  /// Whether this is the device root.
  public var isRoot: Bool { components.isEmpty }

  /// This path with `name` appended; `name` must be a single component.
  public func appending(_ name: String) -> DevicePath {
    precondition(!name.isEmpty && !name.contains("/") && name != "." && name != "..", "not a single component: \(name)")
    return DevicePath(validated: components + [name])
  }

  /// This path with each of the `/`-separated components of `relative` appended.
  public func appending(path relative: String) throws(ProtFSError) -> DevicePath {
    DevicePath(validated: components + (try DevicePath(relative)).components)
  }

  /// Whether `self` is `other` or lies below it.
  public func hasPrefix(_ other: DevicePath) -> Bool { components.starts(with: other.components) }

  /// The components after `prefix`, joined by `/`.
  public func relative(to prefix: DevicePath) -> String {
    components.dropFirst(prefix.components.count).joined(separator: "/")
  }

  /// The path relative to the device root, `.` for the root.
  public var description: String { components.isEmpty ? "." : components.joined(separator: "/") }

  /// Orders component by component.
  public static func < (lhs: DevicePath, rhs: DevicePath) -> Bool {
    lhs.components.lexicographicallyPrecedes(rhs.components)
  }
}
