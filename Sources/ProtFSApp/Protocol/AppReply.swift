import Foundation
import ProtFS
import ProtFSSystem

extension ProtFSError.Code {
  /// An app's supervisor refused the request: the app is not in a state that allows it, or what
  /// the request names is not the app's.
  public static let refused = ProtFSError.Code("refused")
}

/// The supervisor's answer: a value, or a `ProtFSError`, encoded as the session service's replies
/// encode theirs (`error`), so that one decoder reads the failures of both.
public struct AppReply: Codable, Sendable, Equatable {
  /// The value asked for (a task id, the time remaining), or nil.
  public var value: String?
  /// Why the request was refused, or nil when it was carried out. Its message is what users see.
  public var error: ProtFSError?

  /// What kind of BGTaskScheduler refusal it is (a `BackgroundTaskRefusal`'s raw value, the error's
  /// code), where the caller tells them apart; nil for any other reply.
  public var code: String? { error.flatMap { BackgroundTaskRefusal(rawValue: $0.code.rawValue)?.rawValue } }

  /// A reply of `value` or `error`.
  public init(value: String? = nil, error: ProtFSError? = nil) {
    self.value = value
    self.error = error
  }

  /// A success.
  public static func ok(_ value: String? = nil) -> AppReply { AppReply(value: value) }
  /// A refusal saying `why` (`.refused`).
  public static func refused(_ why: String) -> AppReply { AppReply(error: ProtFSError(.refused, why)) }
  /// A refusal with `error`.
  public static func refused(_ error: ProtFSError) -> AppReply { AppReply(error: error) }
  /// A refusal of BGTaskScheduler's kind `code`.
  public static func refused(_ why: String, _ code: BackgroundTaskRefusal) -> AppReply {
    AppReply(error: ProtFSError(ProtFSError.Code(code.rawValue), why))
  }

  private enum Key: String, CodingKey { case value, error, code }

  /// Decodes a reply; one of the old form (`error` a sentence, `code` beside it) too. An older
  /// supervisor can still send that form to an app built by a newer protfs (an app's ProtFSKit is
  /// compiled into it); the supervisor and the `protfs app` commands come from one build.
  public init(from decoder: any Decoder) throws {
    let container = try decoder.container(keyedBy: Key.self)
    value = try container.decodeIfPresent(String.self, forKey: .value)
    if let message = try? container.decodeIfPresent(String.self, forKey: .error) {
      let code = try container.decodeIfPresent(String.self, forKey: .code)
      error = ProtFSError(code.map { ProtFSError.Code($0) } ?? .refused, message)
    } else {
      error = try container.decodeIfPresent(ProtFSError.self, forKey: .error)
    }
  }

  /// Encodes the reply: `value`, and `error` as `ProtFSError` encodes itself.
  public func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: Key.self)
    try container.encodeIfPresent(value, forKey: .value)
    try container.encodeIfPresent(error, forKey: .error)
  }
}
