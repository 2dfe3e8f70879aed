import ProtFSSystem

/// How containers built outside `Containers/` join the device (an import builds them in
/// staging): they must meet the device's protection state as the items already there do, as if
/// they had been there at the last transition. The lock simulator does it (`LockController`):
/// under its transition lock it gives the staged items what the current state requires (the
/// modes a lock takes away, recorded so that the unlock gives them back), then lets the caller
/// move them in, so that no transition can come between. A feature that builds containers asks
/// for this protocol, and so never needs the lock simulator itself.
public protocol ContainerAdmission: Sendable {
  /// Gives every item of the containers in `staged` (a directory laid out as `Containers/`, each
  /// entry a container) the device's current protection state, then calls `move`, which moves
  /// them into `Containers/`, with no transition in between. Throws, having moved nothing, when
  /// an item cannot be brought into line.
  func admit(_ staged: DirectoryHandle, move: () throws(ProtFSError) -> Void) throws(ProtFSError)
}
