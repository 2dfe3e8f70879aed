import Foundation

/// What the supervisors and the session service say of a line they could not decode.
package enum WireDecoding {
  /// A decoding error in a few words, for a reply (never the line itself, which may be huge).
  package static func problem(_ error: any Error) -> String {
    switch error as? DecodingError {
    case .dataCorrupted(let context) where !context.codingPath.isEmpty: "a wrong value at '\(path(context))'"
    case .dataCorrupted: "it is not JSON"
    case .keyNotFound(let key, _): "it has no '\(key.stringValue)'"
    case .typeMismatch(_, let context), .valueNotFound(_, let context): "a wrong value at '\(path(context))'"
    default: "it is not a request"
    }
  }

  private static func path(_ context: DecodingError.Context) -> String {
    context.codingPath.map(\.stringValue).joined(separator: ".")
  }
}
