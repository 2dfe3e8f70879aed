import Foundation
import ProtFS
import ProtFSSystem

/// The directory a SARIF report's locations are relative to: the checkout of the repository that
/// holds the audited tree, so that code scanning can point at the repository's files.
public struct SARIFRoot: Sendable, Equatable {
  /// The directory, absolute, with its symbolic links resolved.
  public var path: String
  /// Where the audited root is below `path`, with a trailing `/`; empty when it is `path` itself.
  public var auditedRootPrefix: String

  /// The SARIF root `given` (relative to `currentDirectory`) for an audit of `target`.
  ///
  /// Throws when `given` does not exist, is not a directory, or does not contain the audited tree
  /// (symbolic links resolved on both sides): a report's locations must name files in the repository.
  public init(
    _ given: String, containing target: AuditTarget,
    currentDirectory: String = FileManager.default.currentDirectoryPath
  ) throws(ProtFSError) {
    let absolute = Device.normalize(given, relativeTo: currentDirectory)
    let fix = "give the repository checkout that holds the audited tree (in GitHub Actions, \"$GITHUB_WORKSPACE\")"
    do {
      _ = try DirectoryHandle(path: absolute)
    } catch {
      let problem =
        switch error.errno {
        case ENOENT: "does not exist"
        case ENOTDIR: "is not a directory"
        default: "cannot be opened: \(error.reasonText)"
        }
      throw ProtFSError(
        error.code, "The SARIF root '\(given)' \(problem).", path: absolute, errno: error.errno, remedy: .advice(fix))
    }
    let root = Self.resolved(absolute)
    // Compared as bytes: String comparison would take differently normalised names as equal.
    let rootBytes = Array(root.utf8)
    let audited = Array(Self.resolved(target.root).utf8)
    let base = rootBytes == [UInt8(ascii: "/")] ? rootBytes : rootBytes + [UInt8(ascii: "/")]
    guard audited == rootBytes || audited.starts(with: base) else {
      throw ProtFSError(
        .invalidArgument, "The audited tree '\(target.root)' is not inside the SARIF root '\(given)'.",
        path: absolute,
        remedy: .advice("\(fix), or audit a tree inside '\(given)'"))
    }
    path = root
    let below = audited == rootBytes ? [] : audited.dropFirst(base.count)
    auditedRootPrefix = below.isEmpty ? "" : String(decoding: below, as: UTF8.self) + "/"
  }

  /// `path` with its symbolic links resolved (`Kernel.realpath(3)`), or as it is when that fails.
  private static func resolved(_ path: String) -> String {
    guard let resolved = Kernel.realpath(path, nil) else { return path }
    defer { free(resolved) }
    return String(cString: resolved)
  }
}
