import Foundation
import ProtFS
import ProtFSSystem

/// A remote notification's payload, as APNs delivers it to an app and `xcrun simctl push` takes
/// it: a JSON object of at most 4 KiB with an `aps` dictionary. Checked wherever it is read (the
/// command line, the supervisor), since whoever sends one is not trusted.
public struct RemoteNotification: Sendable, Equatable {
  /// APNs' limit for a notification's payload, in bytes.
  public static let sizeLimit = 4096

  /// The payload as compact JSON text (the `userInfo` the app is given).
  public let json: String
  /// Whether `aps.content-available` is 1: a silent push, which wakes the app in the background.
  public let isContentAvailable: Bool

  /// Checks `payload`; `source` names where it came from in errors (a file, standard input).
  public init(payload: Data, source: String = "the payload") throws(ProtFSError) {
    guard payload.count <= Self.sizeLimit else {
      throw ProtFSError(
        .invalidArgument,
        "\(source) holds \(payload.count) bytes; APNs delivers at most \(Self.sizeLimit) bytes a notification.",
        remedy: .advice("send less in the payload, and let the app fetch the rest"))
    }
    let object: Any
    do {
      object = try JSONSerialization.jsonObject(with: payload)
    } catch {
      throw ProtFSError(
        .malformed, "\(source) is not JSON (\(FailureReason.of(error))).",
        remedy: .advice("give an APNs payload such as {\"aps\": {\"content-available\": 1}}"))
    }
    guard let dictionary = object as? [String: Any], let aps = dictionary["aps"] as? [String: Any] else {
      throw ProtFSError(
        .malformed, "\(source) is not an APNs payload: it needs an \"aps\" dictionary at its top.",
        remedy: .advice("give an APNs payload such as {\"aps\": {\"content-available\": 1}}"))
    }
    // The number 1, as APNs wants it: a JSON true (a boolean NSNumber, type "c") is not.
    let flag = aps["content-available"] as? NSNumber
    isContentAvailable = flag.map { String(cString: $0.objCType) != "c" && $0.doubleValue == 1 } ?? false
    guard
      let compact = try? JSONSerialization.data(
        withJSONObject: dictionary, options: [.sortedKeys, .withoutEscapingSlashes])
    else {
      throw ProtFSError(.malformed, "\(source) cannot be written back as JSON.")
    }
    json = String(decoding: compact, as: UTF8.self)
  }
}
