/// How protfs spells a command it suggests, so that the command, pasted, acts where this one did:
/// on the same device (`--device DIR` whenever the device is not the one a bare `protfs` finds)
/// and for the same app. A hint without `--device` once created a container on the default device.
package struct CommandSpelling: Sendable, Equatable {
  /// The device root that goes into every command, or nil when a bare `protfs` finds the device.
  package var device: String?
  /// The app the command was about (its `--bundle` or bundle id), if any.
  package var bundleID: String?

  /// A spelling with `device` (nil: the default device) and `bundleID`.
  package init(device: String? = nil, bundleID: String? = nil) {
    self.device = device
    self.bundleID = bundleID
  }

  /// `protfs`, then `--device DIR` when needed, then `words` (shell words, quoted by the caller), in backquotes.
  package func command(_ words: String) -> String {
    var line = "protfs"
    if let device { line += " --device " + Self.shellWord(device) }
    return "`" + line + (words.isEmpty ? "" : " " + words) + "`"
  }

  /// The app's bundle id as a command's BUNDLE-ID argument: the app this command was about, else the placeholder.
  package var bundleArgument: String { bundleID ?? "BUNDLE-ID" }

  /// `--bundle ID ` for the app this command was about, or nothing.
  package var bundleOption: String { bundleID.map { "--bundle \($0) " } ?? "" }

  /// `text` as one shell word: unchanged when it holds only characters no shell treats specially,
  /// else in single quotes (a quote inside becomes `'\''`).
  package static func shellWord(_ text: String) -> String {
    let plain =
      !text.isEmpty
      && text.unicodeScalars.allSatisfy { scalar in
        switch scalar {
        case "a"..."z", "A"..."Z", "0"..."9", "/", ".", "_", "-", "+", ",", ":", "@", "%", "=": true
        default: false
        }
      }
    return plain ? text : "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
  }
}
