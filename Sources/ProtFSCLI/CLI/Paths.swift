import Foundation
import ProtFS
import ProtFSSystem

/// How commands turn a PATH argument into an item on the device.
///
/// An absolute PATH is read as it stands. A relative one is read from a base: the container that
/// `--bundle` names, else the current directory, as every Unix tool reads it. An error about a
/// relative path says which base it was read from.
package enum Paths {
  /// What a relative PATH is read from.
  package enum Base: Sendable {
    /// The container `--bundle` names; every PATH, absolute ones too, must lie inside it.
    case container(Container)
    /// The current directory, absolute.
    case currentDirectory(String)
  }

  /// The base of `invocation`'s PATHs on `device`: the container its `--bundle` names, which must
  /// exist (as a directory: a symbolic link in its place is refused), else the current directory.
  package static func base(_ invocation: Invocation, on device: Device) throws -> Base {
    guard let text = invocation.value(CommonOptions.bundle) else {
      return .currentDirectory(FileManager.default.currentDirectoryPath)
    }
    let container = device.container(try invocation.bundleID(text))
    try container.requireExists()
    return .container(container)
  }

  /// The device path `shown` names, read from `base`. With a container for base, a path that
  /// leaves it (by `..`, or absolute elsewhere) is refused.
  package static func resolve(_ shown: String, from base: Base, on device: Device) throws -> DevicePath {
    try resolve(bytes: Array(shown.utf8), from: base, on: device)
  }

  /// As `resolve(_:from:on:)`, for a PATH given as bytes, which may not be UTF-8 (as the command
  /// line gave it): its names stay as they are, and messages show it escaped.
  package static func resolve(bytes given: [UInt8], from base: Base, on device: Device) throws -> DevicePath {
    let shown = DisplayText.escaping(given)
    switch base {
    case .container(let container):
      do {
        return try container.resolve(bytes: given)
      } catch {
        guard error.code == .outsideDevice else { throw error }
        var refused = error
        refused.remedy = .advice(
          "--bundle \(container.bundleID) names that container: give a path inside it, or leave out --bundle")
        throw refused
      }
    case .currentDirectory(let directory):
      do {
        return try device.resolve(bytes: given, currentDirectory: directory)
      } catch {
        guard error.code == .outsideDevice, given.first != UInt8(ascii: "/") else { throw error }
        throw ProtFSError(
          .outsideDevice,
          "The path '\(shown)' is relative to the current directory '\(directory)', which is outside the device '\(device.root)'.",
          path: shown, remedy: .advice(fix(shown, on: device)))
      }
    }
  }

  /// The path `shown` names, read from `base`, and its status. With `follow`, a symbolic link is
  /// resolved, inside the device only (and inside the container, for a container base).
  package static func existing(_ shown: String, from base: Base, on device: Device, follow: Bool = false) throws
    -> (DevicePath, FileStatus)
  {
    try existing(bytes: Array(shown.utf8), from: base, on: device, follow: follow)
  }

  /// As `existing(_:from:on:follow:)`, for a PATH given as bytes, which may not be UTF-8.
  package static func existing(bytes given: [UInt8], from base: Base, on device: Device, follow: Bool = false)
    throws -> (DevicePath, FileStatus)
  {
    let shown = DisplayText.escaping(given)
    var path = try resolve(bytes: given, from: base, on: device)
    if follow {
      path = try device.resolvingSymlinks(path)
      if case .container(let container) = base, !path.hasPrefix(container.path) {
        throw ProtFSError(
          .outsideDevice,
          "The path '\(shown)' leads through a symbolic link to '\(device.absolutePath(path))', outside the container of \(container.bundleID).",
          path: shown,
          remedy: .advice(
            "--bundle \(container.bundleID) names that container: give the link's target, or leave out --bundle"))
      }
    }
    do {
      return (path, try device.status(path))
    } catch {
      // Read from a directory of the device outside every container (its root, most likely),
      // a path such as Documents/a was surely meant inside an app's container.
      guard error.code == .notFound, given.first != UInt8(ascii: "/"), case .currentDirectory(let directory) = base,
        device.containerContaining(path) == nil
      else { throw error }
      throw ProtFSError(
        .notFound,
        "There is no '\(shown)' in the current directory '\(directory)', which is outside every app's container.",
        path: device.absolutePath(path), errno: error.errno, remedy: .advice(fix(shown, on: device)))
    }
  }

  /// The existing item `shown` names, read from `base`, and its status. A symlink is refused
  /// unless `follow`, which resolves it inside the device only.
  package static func item(_ shown: String, from base: Base, on device: Device, follow: Bool) throws -> (
    DevicePath, FileStatus
  ) {
    try item(bytes: Array(shown.utf8), from: base, on: device, follow: follow)
  }

  /// As `item(_:from:on:follow:)`, for a PATH given as bytes, which may not be UTF-8.
  package static func item(bytes given: [UInt8], from base: Base, on device: Device, follow: Bool) throws -> (
    DevicePath, FileStatus
  ) {
    let (path, status) = try existing(bytes: given, from: base, on: device, follow: follow)
    if status.kind == .symlink {
      let shown = DisplayText.escaping(given)
      throw ProtFSError(
        .symlink, "'\(shown)' is a symbolic link, which has no protection class of its own.", path: shown,
        remedy: .advice("give --follow to use its target"))
    }
    return (path, status)
  }

  /// How to name the relative path `shown`, which was read from the current directory, on `device`:
  /// from the device root when it starts with `Containers/`, else with `--bundle` (naming the app
  /// when only one of the device's containers holds `shown`, or the device has one container).
  private static func fix(_ shown: String, on device: Device) -> String {
    if shown.split(separator: "/").first == Substring(Device.containersDirectoryName) {
      return "give it from the device's root: '\(Device.normalize(shown, relativeTo: device.root))'"
    }
    let containers = (try? device.containers()) ?? []
    let holding = containers.filter { container in
      (try? container.resolve(shown)).map { (try? device.status($0)) != nil } ?? false
    }
    let app = holding.count == 1 ? holding[0] : containers.count == 1 ? containers[0] : nil
    guard let app else {
      return "give --bundle BUNDLE-ID to name a path in that app's container, or an absolute path"
    }
    return "give --bundle \(app.bundleID) to name a path in that app's container, or an absolute path"
  }
}
