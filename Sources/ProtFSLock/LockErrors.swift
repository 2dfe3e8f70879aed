import ProtFSSystem

/// The lock's remedies: a passcode to reset, a program to confine as root, a journal to inspect.
extension Remedy.Action {
  /// Inspect the transition journal; removing it abandons the transition, after which unlock.
  public static let inspectJournal = Self("inspectJournal")
  /// The stored passcode hash is unusable: remove it and set a new passcode.
  public static let resetPasscode = Self("resetPasscode")
  /// Run `protfs exec` as root, where setuid and prctl are not restricted.
  public static let confineAsRoot = Self("confineAsRoot")
}

extension Remedy {
  /// Inspect the transition journal; removing it abandons the transition, after which unlock.
  public static let inspectJournal = Remedy(
    .inspectJournal, advice: "inspect it; removing it abandons the interrupted transition (unlock afterwards)")

  /// The stored passcode hash is unusable: remove it and set a new passcode.
  public static let resetPasscode = Remedy(
    .resetPasscode, advice: "remove the stored passcode hash and set a new passcode")

  /// Confine the program as root, where setuid and prctl are not restricted.
  public static let confineAsRoot = Remedy(
    .confineAsRoot,
    advice: "confine the program as root, outside a user namespace that restricts setuid and prctl")
}
