/// A count with its noun, singular for one ("1 symlink", "2 symlinks"), for the messages that
/// print counts.
package enum Counted {
  /// `count` and `noun`, or `plural` (default: the noun and an s) unless `count` is one.
  package static func text(_ count: Int, _ noun: String, plural: String? = nil) -> String {
    "\(count) \(count == 1 ? noun : plural ?? noun + "s")"
  }
}
