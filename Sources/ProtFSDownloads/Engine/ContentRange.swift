import Foundation

/// A parsed `Content-Range: bytes first-last/total` (total may be `*`), or `bytes */total` for a 416.
package struct ContentRange {
  package var first: Int64?
  package var total: Int64?

  package init?(_ value: String) {
    let trimmed = value.trimmingCharacters(in: .whitespaces)
    guard trimmed.lowercased().hasPrefix("bytes") else { return nil }
    let spec = trimmed.dropFirst(5).trimmingCharacters(in: .whitespaces)
    let parts = spec.split(separator: "/", maxSplits: 1)
    guard parts.count == 2 else { return nil }
    total = Int64(parts[1])
    first = parts[0] == "*" ? nil : parts[0].split(separator: "-").first.flatMap { Int64($0) }
  }
}
