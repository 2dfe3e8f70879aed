/// The version of protfs, and where it lives.
public enum ProtFSVersion {
  /// The version string `protfs --version` prints.
  public static let current = "0.1.0"

  /// The project's home page (SARIF's `informationUri`, the rules' `helpUri`): the address it is
  /// to be published at, which no record in the repository confirms yet.
  public static let homepage = "https://github.com/protfs/protfs"

  /// The absolute URI of `path` (`Policies/README.md#format`) in the project's documentation.
  public static func documentation(_ path: String) -> String { "\(homepage)/blob/main/\(path)" }
}
