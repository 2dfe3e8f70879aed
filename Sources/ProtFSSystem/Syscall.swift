import CProtFSSys
import Foundation

/// Runs a system call, retrying on EINTR, and returns its value or the errno it failed with.
///
/// Every syscall in ProtFS goes through here (swift-system's `valueOrErrno`).
@inline(__always)
package func valueOrErrno<T: FixedWidthInteger>(_ call: () -> T) -> Result<T, Errno> {
  while true {
    let value = call()
    if value != -1 { return .success(value) }
    let code = Foundation.errno
    if code != EINTR { return .failure(Errno(code)) }
  }
}

/// A POSIX error number.
public struct Errno: Error, Sendable, Equatable, Hashable, CustomStringConvertible {
  /// The raw errno value.
  public var rawValue: Int32
  /// Wraps a raw errno value.
  public init(_ rawValue: Int32) { self.rawValue = rawValue }
  /// strerror(3)'s text.
  public var description: String { String(cString: strerror(rawValue)) }

  /// ENOENT.
  public static let noSuchFile = Errno(ENOENT)
  /// ENODATA: no such extended attribute.
  public static let noData = Errno(ENODATA)
  /// ENOSYS: the kernel lacks the system call.
  public static let noSystemCall = Errno(ENOSYS)
  /// ENOTSUP / EOPNOTSUPP.
  public static let notSupported = Errno(ENOTSUP)
  /// EPERM.
  public static let notPermitted = Errno(EPERM)
  /// EACCES.
  public static let accessDenied = Errno(EACCES)
  /// EEXIST.
  public static let exists = Errno(EEXIST)
  /// ELOOP.
  public static let tooManySymlinks = Errno(ELOOP)
  /// ENOTDIR.
  public static let notDirectory = Errno(ENOTDIR)
  /// EXDEV.
  public static let crossDevice = Errno(EXDEV)
  /// ERANGE.
  public static let range = Errno(ERANGE)
}

extension Result where Failure == Errno {
  /// The value, or a `ProtFSError` for `operation` on `path`.
  @inline(__always)
  package func orThrow(_ operation: @autoclosure () -> String, path: @autoclosure () -> String) throws(ProtFSError)
    -> Success
  {
    switch self {
    case .success(let value): return value
    case .failure(let error): throw ProtFSError.system(operation(), path: path(), errno: error.rawValue)
    }
  }
}
