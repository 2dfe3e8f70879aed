import ProtFS

/// The policies compiled for the walk: patterns flattened in the order they are tried (last rule
/// first, so that the first hit is the rule that wins), and narrowed per directory.
///
/// `@unchecked Sendable`: immutable after init; the suffix storage is read-only memory it owns.
package final class RuleMatcher: @unchecked Sendable {
  /// One policy's patterns, last rule first, with the rule each belongs to.
  package struct Compiled: Sendable {
    let patterns: [PathPattern]
    let owners: [Int]
    let rules: [PolicyRule]
    /// Per rule, what the hot path needs to know without copying the rule.
    let facts: [RuleFacts]
  }

  /// A rule's requirement as bits: bit `n` of `satisfiedBy` is set when a class of strength `n`
  /// satisfies it (all bits for a same-as-sibling rule, which is checked on its own).
  package struct RuleFacts {
    var satisfiedBy: UInt8
    var comparesWithSibling: Bool
  }

  /// A pattern that may match children of one directory: plain data, so that the walk's per-item
  /// loop over candidates does no reference counting.
  package struct Candidate {
    /// The pattern's index in its policy's `patterns`.
    var index: Int
    /// The rule it belongs to, and that rule's facts.
    var owner: Int
    var facts: RuleFacts
    /// Whether it matches every child, whatever its name (the directory lies below the literal
    /// prefix of a `Documents/**` pattern); the kind check still applies.
    var matchesEveryChild: Bool
    var directoriesOnly: Bool
    /// `PathPattern.finalLiteralSuffix`: a name that does not end with it cannot match.
    var suffix: UnsafeBufferPointer<UInt8>
  }

  package let policies: [Compiled]
  /// How many patterns all policies have: the most candidates a directory can have.
  package let patternCount: Int
  private let suffixStorage: UnsafeMutableBufferPointer<UInt8>
  /// Per policy and pattern, its final literal suffix in `suffixStorage`.
  private let suffixes: [[UnsafeBufferPointer<UInt8>]]

  package init(_ policies: [Policy]) {
    let compiled = policies.map { policy in
      var patterns: [PathPattern] = []
      var owners: [Int] = []
      for (index, rule) in policy.rules.enumerated().reversed() {
        for pattern in rule.patterns {
          patterns.append(pattern)
          owners.append(index)
        }
      }
      let facts = policy.rules.map { rule in
        RuleFacts(
          satisfiedBy: ProtectionClass.byStrength.enumerated().reduce(UInt8(0)) { bits, entry in
            rule.requirement.isSatisfied(by: entry.element) ? bits | (1 << entry.offset) : bits
          },
          comparesWithSibling: rule.requirement.isSibling)
      }
      return Compiled(patterns: patterns, owners: owners, rules: policy.rules, facts: facts)
    }
    self.policies = compiled
    patternCount = compiled.reduce(0) { $0 + $1.patterns.count }
    let total = compiled.reduce(0) { sum, policy in policy.patterns.reduce(sum) { $0 + $1.finalLiteralSuffix.count } }
    let storage = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: max(1, total))
    var offset = 0
    suffixes = compiled.map { policy in
      policy.patterns.map { pattern in
        let bytes = pattern.finalLiteralSuffix
        _ = UnsafeMutableBufferPointer(rebasing: storage[offset..<offset + bytes.count]).initialize(from: bytes)
        defer { offset += bytes.count }
        return UnsafeBufferPointer(rebasing: storage[offset..<offset + bytes.count])
      }
    }
    suffixStorage = storage
  }

  deinit { suffixStorage.deallocate() }

  /// Writes into `buffer` the patterns of every policy that may match a child of the directory
  /// whose components are `components` of `path` (a cheap, conservative filter run once per
  /// directory), in the order they are tried; `ends[p]` is where policy `p`'s end. `buffer` holds
  /// `patternCount` and `ends` one per policy.
  package func candidates(
    _ path: UnsafeBufferPointer<UInt8>, components: UnsafeBufferPointer<Range<Int>>,
    into buffer: UnsafeMutableBufferPointer<Candidate>, ends: UnsafeMutableBufferPointer<Int>
  ) {
    var count = 0
    for (policyIndex, policy) in policies.enumerated() {
      for (index, pattern) in policy.patterns.enumerated() {
        var everyChild = false
        if let prefix = pattern.literalPrefix {
          // Below the prefix every child matches; anywhere else none does.
          guard prefix.count <= components.count,
            zip(prefix, components).allSatisfy({ UnsafeBufferPointer(rebasing: path[$0.1]).elementsEqual($0.0) })
          else { continue }
          everyChild = true
        } else if !pattern.mayMatchChild(path, directory: components) {
          continue
        }
        let owner = policy.owners[index]
        buffer[count] = Candidate(
          index: index, owner: owner, facts: policy.facts[owner], matchesEveryChild: everyChild,
          directoriesOnly: pattern.matchesDirectoriesOnly, suffix: suffixes[policyIndex][index])
        count += 1
      }
      ends[policyIndex] = count
    }
  }
}

extension PathPattern {
  /// Whether the pattern may match some entry directly inside the directory `directory` of `path`.
  ///
  /// False only when it certainly cannot: too few or too many components, or a literal leading
  /// component that differs.
  package func mayMatchChild(_ path: UnsafeBufferPointer<UInt8>, directory: UnsafeBufferPointer<Range<Int>>) -> Bool {
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
