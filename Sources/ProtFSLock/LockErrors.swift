import ProtFSSystem

/// The lock's remedies: a passcode to reset, a program to confine as root.
extension Remedy.Action {
  /// The stored passcode hash is unusable: remove it and set a new passcode.
  public static let resetPasscode = Self("resetPasscode")
  /// Run `protfs exec` as root, where setuid and prctl are not restricted.
  public static let confineAsRoot = Self("confineAsRoot")
}

extension Remedy {
  /// The stored passcode hash is unusable: remove it and set a new passcode.
  public static let resetPasscode = Remedy(
    .resetPasscode, advice: "remove the stored passcode hash and set a new passcode")

  /// Confine the program as root, where setuid and prctl are not restricted.
  public static let confineAsRoot = Remedy(
    .confineAsRoot,
    advice: "confine the program as root, outside a user namespace that restricts setuid and prctl")
}
