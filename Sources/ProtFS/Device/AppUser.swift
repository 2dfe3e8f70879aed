import Foundation
import ProtFSSystem

/// The unprivileged identity an app's code runs as: it owns its container and nothing else on
/// the device, as `mobile` (uid 501) owns an app's container on iOS.
///
/// `protfs exec` run as root runs its program as this user, and every container protfs creates as
/// root belongs to it. It is uid:gid 501:501 on every device and needs no passwd entry: a fixed
/// identity keeps the device's ownership the same on every host, as the phone's is.
public struct AppUser: Sendable, Hashable, CustomStringConvertible {
  /// The user id.
  public let uid: uid_t
  /// The group id (the only group the program holds).
  public let gid: gid_t

  /// Creates an app user from its ids.
  public init(uid: uid_t, gid: gid_t) {
    self.uid = uid
    self.gid = gid
  }

  /// 501:501, `mobile`'s ids on iOS.
  public static let standard = AppUser(uid: 501, gid: 501)

  /// `uid:gid`, as chown takes it.
  public var description: String { "\(uid):\(gid)" }

  /// The users whose services (the session service, an app's supervisor) a protfs client believes:
  /// root, and the client's own user unless it is the app user (`ControlSocket.trustedServers`).
  public static var trustedServices: Set<uid_t> { ControlSocket.trustedServers(untrusted: standard.uid) }

  /// Whether protfs can hand items to the app user and run programs as it: only root can.
  public static var canAssume: Bool { Kernel.geteuid() == 0 }
}
