/// The policies compiled for the walk: patterns flattened in the order they are tried (last rule
/// first, so that the first hit is the rule that wins), and narrowed per directory.
final class RuleMatcher: Sendable {
  /// One policy's patterns, last rule first, with the rule each belongs to.
  struct Compiled: Sendable {
    let patterns: [PathPattern]
    let owners: [Int]
    let rules: [PolicyRule]
  }

  let policies: [Compiled]

  init(_ policies: [Policy]) {
    self.policies = policies.map { policy in
      var patterns: [PathPattern] = []
      var owners: [Int] = []
      for (index, rule) in policy.rules.enumerated().reversed() {
        for pattern in rule.patterns {
          patterns.append(pattern)
          owners.append(index)
        }
      }
      return Compiled(patterns: patterns, owners: owners, rules: policy.rules)
    }
  }

  /// For each policy, the indices of the patterns that may match a child of the directory whose
  /// components are `components` of `path` (a cheap, conservative filter run once per directory).
  func candidates(_ path: UnsafeBufferPointer<UInt8>, components: UnsafeBufferPointer<Range<Int>>) -> [[Int]] {
    policies.map { policy in
      policy.patterns.indices.filter { policy.patterns[$0].mayMatchChild(path, directory: components) }
    }
  }
}

extension PathPattern {
  /// Whether the pattern may match some entry directly inside the directory `directory` of `path`.
  ///
  /// False only when it certainly cannot: too few or too many components, or a literal leading
  /// component that differs.
  func mayMatchChild(_ path: UnsafeBufferPointer<UInt8>, directory: UnsafeBufferPointer<Range<Int>>) -> Bool {
    let depth = directory.count + 1
    var globs = 0
    var hasAnyComponents = false
    for segment in segments {
      if case .glob = segment { globs += 1 } else { hasAnyComponents = true }
    }
    if hasAnyComponents ? globs > depth : globs != depth { return false }
    // Leading literal components must equal the directory's.
    for (index, segment) in segments.enumerated() {
      guard index < directory.count, case .glob(let tokens) = segment else { break }
      var literal: [UInt8] = []
      for token in tokens {
        guard case .literal(let byte) = token else { return true }
        literal.append(byte)
      }
      if !UnsafeBufferPointer(rebasing: path[directory[index]]).elementsEqual(literal) { return false }
    }
    return true
  }
}
