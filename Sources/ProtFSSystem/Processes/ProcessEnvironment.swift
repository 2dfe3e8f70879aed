import Glibc

/// The process's environment, read from `environ` itself: `ProcessInfo.processInfo.environment`
/// costs a command's (or an app's) start about 0.35 ms at its first use (Foundation's process
/// info is made then) and 40 µs at every use after, for what `getenv` answers in a microsecond.
/// protfs's own code reads the environment only through this.
package enum ProcessEnvironment {
  /// The value of the variable `name`, as `getenv` finds it (the first entry of that name).
  package static func value(_ name: String) -> String? {
    getenv(name).map { String(cString: $0) }
  }

  /// Every entry (`NAME=VALUE`) as it stands, in order.
  package static func entries() -> [String] {
    var entries: [String] = []
    var index = 0
    while let entry = environ[index] {
      entries.append(String(cString: entry))
      index += 1
    }
    return entries
  }

  /// Every variable, by name; of two entries with one name the first counts, as for `getenv`.
  /// Entries without `=` are passed over.
  package static func all() -> [String: String] { variables(entries()) }

  /// The variables of `entries` (`NAME=VALUE`, an environment's, such as another process sent), by
  /// name, as `all()` makes them of this process's.
  package static func variables(_ entries: [String]) -> [String: String] {
    var variables: [String: String] = [:]
    for text in entries {
      guard let equals = text.utf8.firstIndex(of: UInt8(ascii: "=")) else { continue }
      let name = String(text[..<equals])
      if variables[name] == nil { variables[name] = String(text[text.utf8.index(after: equals)...]) }
    }
    return variables
  }
}
