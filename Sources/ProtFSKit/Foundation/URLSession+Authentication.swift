import Foundation
import ProtFSDownloads

extension URLSession {
  /// A task of this process (`id`) met a server's demand for credentials: the delegate's
  /// task-level method answers it on the delegate queue, in order with the task's other calls, or,
  /// without a delegate to ask (or left to the default handling), the configuration's credential
  /// storage does, once; a credential the delegate gives that is to be kept goes there.
  func authenticate(
    task id: Int, _ challenge: DataTransfer.Challenge,
    _ answer: @escaping @Sendable (DataTransfer.ChallengeAnswer) -> Void
  ) {
    let space = Self.protectionSpace(of: challenge)
    let storage = configuration.urlCredentialStorage
    let stored = storage?.defaultCredential(for: space)
    // The storage's credential is sent once; after it was refused the 401 stands.
    let byDefault: @Sendable () -> Void = {
      guard challenge.previousFailureCount == 0, let stored, let user = stored.user, let password = stored.password
      else { return answer(.answerWithResponse) }
      answer(.credential(user: user, password: password))
    }
    guard let task = state.withLock({ $0.tasks[id] }), let delegate = taskDelegate(task) as? URLSessionTaskDelegate
    else {
      return byDefault()
    }
    let proposed =
      challenge.proposedUser.flatMap { storage?.credentials(for: space)?[$0] }
      ?? challenge.proposedUser.map { URLCredential(user: $0, password: "", persistence: .none) } ?? stored
    let fields = HTTPURLResponse.fields(challenge.response.headers.map { ($0.name, $0.value) })
    let asked = URLAuthenticationChallenge(
      protectionSpace: space, proposedCredential: proposed, previousFailureCount: challenge.previousFailureCount,
      failureResponse: HTTPURLResponse(
        url: challenge.response.url, statusCode: challenge.response.statusCode, httpVersion: "HTTP/1.1",
        headerFields: fields),
      error: nil)
    pipeline.async {
      self.onDelegateQueue {
        delegate.urlSession(self, task: task, didReceive: asked) { disposition, credential in
          switch disposition {
          case .useCredential:
            guard let credential, let user = credential.user, let password = credential.password else {
              return answer(.answerWithResponse)
            }
            storage?.set(credential, for: space)
            answer(.credential(user: user, password: password))
          case .performDefaultHandling: byDefault()
          case .cancelAuthenticationChallenge: answer(.cancel)
          case .rejectProtectionSpace: answer(.answerWithResponse)
          }
        }
      }
    }
  }

  /// The protection space a challenge names: its server, realm and scheme.
  static func protectionSpace(of challenge: DataTransfer.Challenge) -> URLProtectionSpace {
    let scheme = challenge.url.scheme?.lowercased() ?? "http"
    return URLProtectionSpace(
      host: challenge.url.host ?? "", port: challenge.url.port ?? (scheme == "https" ? 443 : 80), protocol: scheme,
      realm: challenge.realm,
      authenticationMethod: challenge.scheme == .basic
        ? NSURLAuthenticationMethodHTTPBasic : NSURLAuthenticationMethodHTTPDigest)
  }
}
