import Foundation

/// One finding of `Doctor`: what the machine gives protfs in one respect, how good that is, and
/// what would make it better.
package struct DoctorCheck: Sendable, Equatable, Codable {
  /// How a check went.
  package enum Level: String, Sendable, Codable, Comparable {
    /// What protfs needs and prefers is there.
    case ok
    /// protfs works, with less (a fallback, a feature missing, a weaker guarantee).
    case warning
    /// Something protfs needs is missing: the commands that need it fail.
    case error

    private var rank: Int {
      switch self {
      case .ok: 0
      case .warning: 1
      case .error: 2
      }
    }

    /// `ok` < `warning` < `error`.
    package static func < (lhs: Level, rhs: Level) -> Bool { lhs.rank < rhs.rank }
  }

  /// The check's stable name, for scripts (`fuse`, `xattr`, `cgroup-freezer`, `device-access`,
  /// `path-access`, `tiocsti`, `kernel-calls`).
  package var name: String
  /// What was checked, for people ("FUSE").
  package var title: String
  /// How it went.
  package var level: Level
  /// What was found, a sentence naming the paths and values.
  package var detail: String
  /// How to do better, when the level is not `ok`.
  package var fix: String?

  private enum CodingKeys: String, CodingKey {
    case name, title, level, detail, fix
  }

  /// Encodes every key, `fix` as null when there is none (as every `--json` document does).
  package func encode(to encoder: any Encoder) throws {
    var container = encoder.container(keyedBy: CodingKeys.self)
    try container.encode(name, forKey: .name)
    try container.encode(title, forKey: .title)
    try container.encode(level, forKey: .level)
    try container.encode(detail, forKey: .detail)
    try container.encode(fix, forKey: .fix)
  }

  /// A finding as given.
  package init(name: String, title: String, level: Level, detail: String, fix: String? = nil) {
    self.name = name
    self.title = title
    self.level = level
    self.detail = detail
    self.fix = fix
  }
}
