import Foundation
import ProtFS
import ProtFSSystem

/// A program named as a shell names it, found as the app user finds it.
public enum ExecutableLookup {
  /// `command` with its program looked up and made absolute, as a plan and the app's record keep
  /// it. Throws when no executable regular file of that name is found (saying which directories
  /// the app user could not search).
  public static func absoluteCommand(_ command: [String]) throws(ProtFSError) -> [String] {
    guard let name = command.first else {
      throw ProtFSError(.invalidArgument, "No program to run was given.")
    }
    let lookup = lookup(name)
    guard let program = lookup.path else {
      let skipped =
        lookup.closedDirectories.isEmpty
        ? ""
        : " (skipped the directories uid \(AppUser.standard.uid) cannot search: "
          + lookup.closedDirectories.joined(separator: ", ") + ")"
      throw ProtFSError(.notFound, "Cannot run '\(name)': it is not an executable file\(skipped).")
    }
    return [program.hasPrefix("/") ? program : FileManager.default.currentDirectoryPath + "/" + program]
      + command.dropFirst()
  }

  /// The file `name` runs, looked up in $PATH as execvp does, when it is an executable regular file.
  public static func path(of name: String) -> String? { lookup(name).path }

  /// The file `name` runs, looked up in $PATH as execvp does, when it is an executable regular
  /// file, and the directories passed over: as root, as the app user (who runs it) looks it up,
  /// so that a directory closed to it (root's own, first on root's PATH) is skipped.
  static func lookup(_ name: String) -> (path: String?, closedDirectories: [String]) {
    let candidates =
      name.contains("/")
      ? [name]
      : (ProcessEnvironment.value("PATH") ?? "/usr/bin:/bin").split(separator: ":").map { "\($0)/\(name)" }
    var closed: [String] = []
    for path in candidates {
      if AppUser.canAssume, AppUser.standard.firstClosedDirectory(to: path) != nil {
        closed.append((path as NSString).deletingLastPathComponent)
        continue
      }
      var status = stat()
      guard case .success = Kernel.stat(path, &status), status.st_mode & S_IFMT == S_IFREG,
        status.st_mode & 0o111 != 0
      else { continue }
      return (path, closed)
    }
    return (nil, closed)
  }
}
