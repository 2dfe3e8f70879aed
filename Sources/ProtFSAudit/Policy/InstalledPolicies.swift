/// The policy files installed with protfs (the repository's `Policies/`): `PREFIX/share/protfs`
/// for a binary in `PREFIX/bin`, as `scripts/install.sh` and the Debian package lay them out, so
/// that `--policy strict` means `PREFIX/share/protfs/strict.policy` wherever protfs runs.
public struct InstalledPolicies: Sendable, Equatable {
  /// The directory the policy files are installed in.
  public var directory: String

  /// The policies in `directory`.
  public init(directory: String) {
    self.directory = directory
  }

  /// The policies installed beside the binary at `executable`, a path with its links resolved
  /// (as `/proc/self/exe` reads): `/usr/bin/protfs` gives `/usr/share/protfs`.
  public init(executable: String) {
    let bin = Self.parent(of: executable)
    let prefix = Self.parent(of: bin)
    directory = (prefix == "/" ? "" : prefix) + "/share/protfs"
  }

  /// The file a `--policy` argument names. A path (any argument with a slash, or a file of that
  /// name in the current directory, which `exists` answers for) is the file as given; a bare name
  /// such as `strict` or `strict.policy` is the installed policy of that name.
  public func path(for argument: String, exists: (String) -> Bool) -> String {
    if argument.contains("/") || argument.isEmpty || exists(argument) { return argument }
    return directory + "/" + (argument.hasSuffix(".policy") ? argument : argument + ".policy")
  }

  /// The directory holding `path`'s last component ("/" for a top-level item).
  private static func parent(of path: String) -> String {
    var trimmed = Substring(path)
    while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
    guard let slash = trimmed.lastIndex(of: "/") else { return "." }
    return slash == trimmed.startIndex ? "/" : String(trimmed[..<slash])
  }
}
