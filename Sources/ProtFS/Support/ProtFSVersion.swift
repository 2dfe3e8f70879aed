/// The version of protfs.
public enum ProtFSVersion {
  /// The version string `protfs --version` prints.
  public static let current = "0.1.0"
}
