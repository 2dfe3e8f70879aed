import Foundation

/// The error every ProtFS operation throws: what failed, on which path, the errno, and a fix-it hint.
public struct ProtFSError: Error, Sendable, Equatable, CustomStringConvertible {
  /// What kind of failure this is; the command line maps it to an exit status.
  public enum Code: String, Sendable, Codable {
    /// A value given by the caller is not valid (class name, bundle id, size, …).
    case invalidArgument
    /// The item does not exist.
    case notFound
    /// The item already exists where protfs must create it.
    case alreadyExists
    /// The item has no `user.protfs.class` attribute.
    case noAttribute
    /// The filesystem does not support user extended attributes.
    case xattrUnsupported
    /// An attribute holds a value protfs does not understand.
    case corruptAttribute
    /// Permission bits or ownership refused the operation.
    case permissionDenied
    /// The path leaves the device, directly or through a symlink.
    case outsideDevice
    /// The path is a symlink, which protfs does not follow.
    case symlink
    /// The device directory has not been initialised.
    case notInitialized
    /// The data is protected and not available in the device's current state (EPERM on iOS).
    case protectedDataUnavailable
    /// A file protfs reads (entitlements, state, policy) is malformed.
    case malformed
    /// Any other system call failure.
    case io
    /// A download could not reach its server, the server failed, or the transfer broke off.
    case network
    /// A download was cancelled by its caller.
    case cancelled
    /// A download's bytes do not match the SHA-256 digest the caller expected.
    case checksumMismatch
  }

  /// What kind of failure this is.
  public var code: Code
  /// A whole sentence saying what went wrong, quoting the path.
  public var message: String
  /// The path involved, if any.
  public var path: String?
  /// The errno behind the failure, if a system call failed.
  public var errno: Int32?
  /// What the user can do about it, if anything.
  public var hint: String?

  /// Creates an error.
  public init(_ code: Code, _ message: String, path: String? = nil, errno: Int32? = nil, hint: String? = nil) {
    self.code = code
    self.message = message
    self.path = path
    self.errno = errno
    self.hint = hint
  }

  /// The message followed by the hint.
  public var description: String {
    guard let hint else { return message }
    if message.hasSuffix("?") { return "\(message) \(hint.prefix(1).uppercased())\(hint.dropFirst())." }
    let base = message.hasSuffix(".") ? String(message.dropLast()) : message
    return "\(base); \(hint)."
  }

  /// Maps an errno from `operation` on `path` to an error, once, at the call site.
  public static func system(_ operation: String, path: String, errno: Int32) -> ProtFSError {
    let reason = String(cString: strerror(errno))
    let message = "Cannot \(operation) '\(path)': \(reason)."
    switch errno {
    case ENOENT:
      return ProtFSError(.notFound, message, path: path, errno: errno)
    case EEXIST:
      return ProtFSError(.alreadyExists, message, path: path, errno: errno)
    case EACCES:
      return ProtFSError(.permissionDenied, message, path: path, errno: errno)
    case EPERM:
      return ProtFSError(.permissionDenied, message, path: path, errno: errno)
    case ELOOP:
      return ProtFSError(
        .symlink, "Cannot \(operation) '\(path)': it is a symbolic link, which protfs does not follow.",
        path: path, errno: errno)
    case ENOTSUP:
      return ProtFSError(
        .xattrUnsupported,
        "Cannot \(operation) '\(path)': its filesystem does not support user extended attributes.",
        path: path, errno: errno,
        hint: "put the device on a filesystem with user xattrs (ext4, xfs, btrfs, tmpfs)")
    default:
      return ProtFSError(.io, message, path: path, errno: errno)
    }
  }
}

extension ProtFSError: LocalizedError {
  /// The message followed by the hint.
  public var errorDescription: String? { description }
}
