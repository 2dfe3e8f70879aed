/// "Did you mean" suggestions for near misses.
public enum Suggestion {
  /// The candidate closest to `word` by edit distance, if it is close enough to be a typo.
  public static func nearest(to word: String, in candidates: [String]) -> String? {
    let limit = max(2, word.count / 3)
    var best: (String, Int)?
    for candidate in candidates {
      let distance = editDistance(word, candidate)
      if distance <= limit, distance < (best?.1 ?? .max) { best = (candidate, distance) }
      if candidate.hasPrefix(word), word.count >= 3, best == nil { best = (candidate, limit) }
    }
    return best?.0
  }

  /// The Levenshtein distance between two strings.
  public static func editDistance(_ a: String, _ b: String) -> Int {
    let a = Array(a)
    let b = Array(b)
    if a.isEmpty { return b.count }
    if b.isEmpty { return a.count }
    var previous = Array(0...b.count)
    var current = [Int](repeating: 0, count: b.count + 1)
    for i in 1...a.count {
      current[0] = i
      for j in 1...b.count {
        let cost = a[i - 1] == b[j - 1] ? 0 : 1
        current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
      }
      swap(&previous, &current)
    }
    return previous[b.count]
  }
}
