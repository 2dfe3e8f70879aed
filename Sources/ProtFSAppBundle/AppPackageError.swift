import Foundation
import ProtFSSystem

/// The errors of reading an app package: each names the file (the package, or the member inside
/// it) and says what is wrong with it, in one sentence.
enum AppPackageError {
  /// The advice every refusal of a package ends with.
  static let advice = Remedy.advice("give an .ipa file or an .app directory as Xcode or the App Store makes them")

  /// `path` is not read because of `reason` (a clause: "its code signature is truncated").
  static func malformed(_ path: String, _ reason: String) -> ProtFSError {
    ProtFSError(.malformed, "Cannot read the app '\(path)': \(reason).", path: path, remedy: advice)
  }

  /// `path` is a symbolic link, which is never followed.
  static func symlink(_ path: String) -> ProtFSError {
    ProtFSError(
      .symlink, "Cannot read the app '\(path)': it is a symbolic link, which protfs does not follow.", path: path,
      errno: ELOOP, remedy: advice)
  }

  /// `path` (a member the package must have) is absent.
  static func missing(_ path: String, _ what: String) -> ProtFSError {
    ProtFSError(.notFound, "Cannot read the app '\(path)': it has no \(what).", path: path, remedy: advice)
  }
}
