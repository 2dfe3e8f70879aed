import Foundation
import ProtFSSystem

/// The environment a program of untrusted code starts with (`exec`, every app launch), built for
/// it rather than inherited, as iOS builds an app's and `xcrun simctl launch` passes only what its
/// caller names with `SIMCTL_CHILD_`.
///
/// The caller's environment holds what is root's: tokens (`GITHUB_TOKEN`, `AWS_SECRET_ACCESS_KEY`),
/// database URLs, `SSH_AUTH_SOCK` (a key agent), `HOME=/root`. None of it reaches the program. It
/// gets a fixed `PATH`, the caller's `LANG` when it names a locale, `TERM` when it has a terminal,
/// what the system sets for it (an app's `HOME`, `TMPDIR`, `CFFIXED_USER_HOME` and `PROTFS_*`; the
/// directory of the protfs that starts it on its `PATH`), and
/// only what the caller passes on purpose: `PROTFS_CHILD_NAME=value` in the caller's environment
/// becomes `NAME=value`, and so does each `--env NAME=value` (which wins over a `PROTFS_CHILD_`
/// variable of the same name). The system's variables are never replaced.
package enum ProgramEnvironment {
  /// The search path every program starts with.
  package static let searchPath = "/usr/local/bin:/usr/bin:/bin"
  /// The prefix of the caller's variables passed on without it.
  package static let childPrefix = "PROTFS_CHILD_"
  /// The locale when the caller's `LANG` names none.
  package static let defaultLocale = "C.UTF-8"

  /// The program's environment, as "NAME=value" entries sorted by name: built from `caller` (the
  /// caller's own variables, `ProcessEnvironment.all()`), `passed` (`--env`'s "NAME=value" entries, checked by
  /// `parse(passed:)`), `system` (the variables the system sets for the program, which win),
  /// `defaults` (the system's, which the caller's may replace), whether the program has a
  /// terminal, and the directory of the protfs binary that starts it (added to `PATH`).
  package static func build(
    caller callers: [String: String], passed: [(name: String, value: String)], system: [String: String],
    defaults: [String: String] = [:], terminal: Bool, protfsDirectory: String? = nil
  ) -> [String] {
    // The directory of the protfs that starts the program comes last: apps call `protfs app
    // begin-task` and the like by name, wherever protfs is installed.
    let path = protfsDirectory.map {
      searchPath.split(separator: ":").contains(Substring($0)) ? searchPath : searchPath + ":" + $0
    }
    var variables = ["PATH": path ?? searchPath, "LANG": locale(callers["LANG"])]
    if terminal, let term = callers["TERM"], isPlain(term) { variables["TERM"] = term }
    variables.merge(defaults) { _, given in given }
    for (name, value) in callers where name.hasPrefix(childPrefix) {
      let passedName = String(name.dropFirst(childPrefix.count))
      if isName(passedName) { variables[passedName] = value }
    }
    for (name, value) in passed { variables[name] = value }
    variables.merge(system) { _, systems in systems }
    return variables.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
  }

  /// `--env` values ("NAME=value") as names and values; throws the first that names no variable.
  package static func parse(passed entries: [String]) throws(ProtFSError) -> [(name: String, value: String)] {
    try entries.map { entry throws(ProtFSError) in
      guard let equals = entry.firstIndex(of: "="), isName(String(entry[..<equals])) else {
        throw ProtFSError(
          .invalidArgument,
          "'\(entry)' is not NAME=VALUE: a name is letters, digits and underscores, not starting with a digit.",
          remedy: .advice("write it as --env NAME=VALUE, for example --env API_URL=http://127.0.0.1:8080"))
      }
      return (String(entry[..<equals]), String(entry[entry.index(after: equals)...]))
    }
  }

  /// Whether `name` is a variable's name: letters, digits and underscores, not starting with a digit.
  package static func isName(_ name: String) -> Bool {
    let bytes = Array(name.utf8)
    guard let first = bytes.first, !(48...57).contains(first) else { return false }
    return bytes.allSatisfy { $0 == 95 || (65...90).contains($0) || (97...122).contains($0) || (48...57).contains($0) }
  }

  /// The caller's `LANG` when it names a locale plainly (letters, digits, `_.@-`), else C.UTF-8.
  private static func locale(_ lang: String?) -> String {
    guard let lang, !lang.isEmpty, lang.count <= 64, isPlain(lang) else { return defaultLocale }
    return lang
  }

  private static func isPlain(_ text: String) -> Bool {
    text.utf8.count <= 64
      && text.utf8.allSatisfy { byte in
        (65...90).contains(byte) || (97...122).contains(byte) || (48...57).contains(byte) || "_.@-+".utf8.contains(byte)
      }
  }
}
