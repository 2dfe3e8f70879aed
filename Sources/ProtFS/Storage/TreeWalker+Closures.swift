import ProtFSSystem

extension TreeWalker {
  /// Visits every entry below each root with a closure that is handed the entry and its directory's
  /// path relative to its root ("" for the root itself); returning true for a directory walks it.
  /// Directories that cannot be opened or listed are collected in `failures`, not thrown.
  public func walk<Accumulator: Sendable>(
    roots: [DirectoryHandle], make: @escaping @Sendable () -> Accumulator,
    visit: @escaping @Sendable (inout Accumulator, TreeEntry, _ relativeDirectory: String) -> Bool
  ) -> (accumulators: [Accumulator], failures: [ProtFSError]) {
    let visitor = ClosureVisitor(accumulator: make(), body: visit)
    let (visitors, _) = walk(roots.map { Root($0, "") }, visitor: visitor)
    return (visitors.map(\.accumulator), visitors.flatMap(\.failures))
  }
}

/// The visitor behind `TreeWalker.walk(roots:make:visit:)`: the context is the directory's relative path.
private struct ClosureVisitor<Accumulator: Sendable>: TreeVisitor {
  /// This worker's share of what the caller gathers.
  var accumulator: Accumulator
  /// The caller's closure.
  let body: @Sendable (inout Accumulator, TreeEntry, String) -> Bool
  /// Directories that could not be opened or listed.
  var failures: [ProtFSError] = []

  /// A visitor starting from `accumulator`.
  init(accumulator: Accumulator, body: @escaping @Sendable (inout Accumulator, TreeEntry, String) -> Bool) {
    self.accumulator = accumulator
    self.body = body
  }

  /// Calls the closure; walks a directory it returns true for.
  mutating func visit(_ entry: inout TreeEntry, in relativeDirectory: String) -> TreeStep<String> {
    guard body(&accumulator, entry, relativeDirectory), entry.kind == .directory else { return .skip }
    let name = entry.nameString
    return .descend(relativeDirectory.isEmpty ? name : relativeDirectory + "/" + name)
  }

  /// Collects the failure; the walk goes on.
  mutating func failed(_ error: ProtFSError, in relativeDirectory: String) -> Bool {
    failures.append(error)
    return true
  }
}
