import Foundation
import ProtFSSystem

/// Where a download's file name comes from, and the check that keeps it inside its directory.
public enum DownloadFileName {
  /// The name in the URL's last path component (percent-decoded), validated.
  public static func fromURL(_ url: URL) throws(ProtFSError) -> String {
    // `URL.lastPathComponent` decodes "%2F" into "/", which `validate` then refuses.
    let name = url.lastPathComponent
    guard !name.isEmpty, name != "/" else {
      throw ProtFSError(
        .invalidArgument, "The URL '\(url.absoluteString)' has no file name in its path.",
        remedy: .advice("give a URL that ends in a file name, or name the file explicitly"))
    }
    return try validate(name, source: "the URL '\(url.absoluteString)'")
  }

  /// The file name a Content-Disposition header value names: its `filename*` (RFC 5987) or
  /// `filename` parameter, of which only the last path segment counts (RFC 6266 §4.3: a recipient
  /// uses no directory information; curl -J and wget do the same). Nil when the header names
  /// none, or nothing that is a plain name remains (`..`, a NUL): the URL's name is used then.
  public static func fromContentDisposition(_ value: String) -> String? {
    var found: String?
    for part in value.split(separator: ";") {
      let pair = part.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
      guard pair.count == 2 else { continue }
      let key = pair[0].lowercased()
      var raw = pair[1]
      if key == "filename*" {
        // RFC 5987: charset'language'percent-encoded; it wins over a plain filename.
        let pieces = raw.split(separator: "'", maxSplits: 2, omittingEmptySubsequences: false)
        if pieces.count == 3, let decoded = String(pieces[2]).removingPercentEncoding {
          found = decoded
          break
        }
      } else if key == "filename" {
        if raw.hasPrefix("\""), raw.hasSuffix("\""), raw.count >= 2 {
          raw = String(raw.dropFirst().dropLast()).replacingOccurrences(of: "\\\"", with: "\"")
        }
        found = raw
      }
    }
    guard let found else { return nil }
    let last =
      found.split(separator: "/", omittingEmptySubsequences: false).last?
      .split(separator: "\\", omittingEmptySubsequences: false).last.map(String.init) ?? found
    return isPlain(last) ? last : nil
  }

  /// Returns `name` if it is a plain file name: not empty, no `/`, no NUL, not `.` and no `..`.
  /// `source` (what the name came from, for the error) is only built for a name that fails.
  public static func validate(_ name: String, source: @autoclosure () -> String) throws(ProtFSError) -> String {
    if !isPlain(name) {
      throw ProtFSError(
        .invalidArgument,
        "The file name '\(name)' from \(source()) is not allowed: it must not be empty or contain '..' or '/'.",
        remedy: .advice("download it under another name"))
    }
    return name
  }

  /// One pass over the bytes: thousands of small downloads check a name each.
  private static func isPlain(_ name: String) -> Bool {
    var previous: UInt8 = 0
    var count = 0
    for byte in name.utf8 {
      if byte == UInt8(ascii: "/") || byte == 0 || (byte == UInt8(ascii: ".") && previous == byte) { return false }
      previous = byte
      count += 1
    }
    return count > 1 || (count == 1 && previous != UInt8(ascii: "."))
  }

  /// `name` with ` (n)` before its extension, as browsers name a second download of one name:
  /// `report (1).pdf`, `archive (2).tar.gz`, `README (1)`.
  public static func numbered(_ name: String, _ n: Int) -> String {
    var stem = Substring(name)
    var suffix = Substring("")
    // A leading dot starts a hidden name, not an extension.
    if let dot = name.dropFirst().lastIndex(of: ".") {
      stem = name[..<dot]
      suffix = name[dot...]
      // A compressed tarball keeps both parts of its extension together.
      if stem.lowercased().hasSuffix(".tar"), stem.count > 4 {
        suffix = name[name.index(dot, offsetBy: -4)...]
        stem = name[..<name.index(dot, offsetBy: -4)]
      }
    }
    return "\(stem) (\(n))\(suffix)"
  }
}
