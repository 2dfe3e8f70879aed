import ProtFSSystem

/// What went wrong with a sealed device's keys or contents.
///
/// The cases say which check failed; ``protfsError(path:)`` words it for a user, naming the file.
package enum SealError: Error, Sendable, Equatable {
  /// The passcode does not unwrap the class keys.
  case wrongPasscode
  /// The keybag cannot be read: a tag, a length or its signature is wrong. The text says which.
  case damagedKeybag(String)
  /// The device key is not the size protfs made it (32 bytes).
  case deviceKeySize(Int)
  /// A file's key record is missing, truncated, of another version, or for another class than the
  /// file's. The text says which.
  case damagedFileKey(String)
  /// A file's wrapped key does not unwrap with its class's key: it was made for another file or another
  /// class, or it was changed.
  case keyMismatch
  /// The class key the operation needs is evicted (the device is locked or not yet unlocked).
  case classKeyUnavailable(ProtectionClassCode)
  /// OpenSSL refused or failed an operation (out of memory, a refused key).
  case crypto(String)
  /// A system call on the file failed: what it did, and the error (a full disk, a file gone).
  case system(String, Errno)

  /// The error as protfs reports it, naming `path`.
  package func protfsError(path: String) -> ProtFSError {
    switch self {
    case .wrongPasscode:
      ProtFSError(.permissionDenied, "The passcode does not unlock the keybag of '\(path)'.", path: path)
    case .damagedKeybag(let why):
      ProtFSError(.malformed, "The keybag '\(path)' is damaged: \(why).", path: path)
    case .deviceKeySize(let size):
      ProtFSError(
        .malformed, "The device key '\(path)' holds \(size) bytes, not the 32 protfs made it with.", path: path)
    case .damagedFileKey(let why):
      ProtFSError(.malformed, "The key of '\(path)' is damaged: \(why).", path: path)
    case .keyMismatch:
      ProtFSError(
        .malformed,
        "The key of '\(path)' does not unwrap with its class key: it belongs to another file or class, "
          + "or it was changed.", path: path)
    case .classKeyUnavailable(let code):
      ProtFSError(
        .permissionDenied,
        "The key of class \(code) is evicted while the device is locked, so '\(path)' "
          + "cannot be read.", path: path)
    case .crypto(let why):
      ProtFSError(.io, "OpenSSL failed on '\(path)': \(why).", path: path)
    case .system(let what, let errno):
      ProtFSError.system(what, path: path, errno: errno)
    }
  }
}
