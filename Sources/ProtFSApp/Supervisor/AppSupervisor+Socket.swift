import Foundation
import ProtFS
import ProtFSSystem
import Synchronization

/// The supervisor's socket: who may speak to it, and what a line it reads asks.
extension AppSupervisor {
  func serve() {
    // The codec's first use costs about a millisecond (the runtime makes its types' metadata):
    // spent here while the app starts, not on the app's first request.
    _ = try? JSONDecoder().decode(AppRequest.self, from: Data(#"{"kind":"timeRemaining"}"#.utf8))
    _ = Self.line(.refused("The request is not valid."))
    while let (connection, peer) = ControlSocket.accept(listener) {
      // Checked before the peer gets a thread: whoever may not talk to the app is answered at once.
      if let refusal = admit(peer) {
        ControlSocket.refuse(connection, line: Self.line(.refused(refusal)))
        continue
      }
      Thread { [self] in
        defer {
          connection.close()
          openConnections.withLock { $0[peer.uid, default: 1] -= 1 }
        }
        ControlSocket.limitWaits(connection)
        let reply: AppReply
        var counted = false
        switch Self.request(ControlSocket.readLine(connection, within: ControlSocket.lineTimeout)) {
        case .success(let request):
          // Counted until its answer is written (below): an exit waits for it.
          answering.add(1, ordering: .acquiringAndReleasing)
          counted = true
          if controllers.contains(peer.uid) || request.isTheAppsOwn {
            reply = perform(request)
          } else {
            reply = .refused(
              ProtFSError(
                .permissionDenied,
                "An app cannot ask for \(request.kind.rawValue) itself (user \(peer.uid) is the app's): the system and the user decide that."
              ))
          }
        case .failure(let refusal):
          reply = .refused(refusal)
        }
        #if DEBUG
          // Debug builds: a test holds each answer back, so that the app ends before it is written.
          if let delay = ProcessEnvironment.value("PROTFS_DEBUG_REPLY_DELAY_MS").flatMap(UInt32.init) {
            Kernel.usleep(delay * 1000)
          }
        #endif
        ControlSocket.writeLine(connection, Self.line(reply))
        if counted { answering.subtract(1, ordering: .acquiringAndReleasing) }
      }.start()
    }
    listener.close()
  }

  /// Counts `peer`'s connection in, or says why it is refused: root and the supervisor's own user
  /// control the app; the app user speaks for it only from one of the app's own processes (below
  /// this supervisor: another app, which runs as the same user, may not), with at most
  /// `connectionsPerAppUser` connections open.
  func admit(_ peer: PeerCredentials) -> String? {
    if !controllers.contains(peer.uid) {
      guard appUsers.contains(peer.uid) else { return "User \(peer.uid) may not control the app \(bundleID)." }
      guard Self.descends(peer.pid, from: Kernel.getpid()), peer.isStillConnectedProcess else {
        return
          "Process \(peer.pid) is not one of the app \(bundleID)'s; only the app itself, root and its user may speak to its supervisor."
      }
    }
    return openConnections.withLock { counts -> String? in
      if !controllers.contains(peer.uid), counts[peer.uid, default: 0] >= Self.connectionsPerAppUser {
        return
          "The app \(bundleID) holds \(Self.connectionsPerAppUser) connections to its supervisor already; close one first."
      }
      counts[peer.uid, default: 0] += 1
      return nil
    }
  }

  /// Whether process `pid` is a descendant of process `ancestor`.
  static func descends(_ pid: pid_t, from ancestor: pid_t) -> Bool {
    var current = pid
    for _ in 0..<64 where current > 1 {
      guard let parent = ProcessIdentity.parent(of: current) else { return false }
      if parent == ancestor { return true }
      current = parent
    }
    return false
  }

  /// The request `line` holds, or why it holds none: a value of the wrong kind is refused with what
  /// the decoder found wrong (the line itself is never quoted: it may be huge).
  package static func request(_ line: String?) -> Result<AppRequest, ProtFSError> {
    guard let line else { return .failure(ProtFSError(.invalidArgument, "The request is not valid.")) }
    do {
      return .success(try JSONDecoder().decode(AppRequest.self, from: Data(line.utf8)))
    } catch let error as ProtFSError {
      return .failure(error)
    } catch {
      return .failure(ProtFSError(.invalidArgument, "The request is not valid: \(WireDecoding.problem(error))."))
    }
  }

  /// `reply` as a JSON line's text.
  static func line(_ reply: AppReply) -> String {
    (try? JSONEncoder().encode(reply)).map { String(decoding: $0, as: UTF8.self) } ?? #"{"error":"internal"}"#
  }
}
