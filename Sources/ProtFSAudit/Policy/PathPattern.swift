import ProtFSSystem

/// A path pattern with `.gitignore` syntax, matched against paths relative to a container root.
///
/// `*` matches any run of characters but `/`, `?` one character but `/`, `[...]` one character of a
/// set (`[!...]` or `[^...]` negates, `a-z` ranges), `\x` the character `x`. A leading `**/` matches
/// in every directory, a middle `/**/` zero or more directories, a trailing `/**` everything inside.
/// A pattern with a `/` at its start or middle is anchored at the container root; otherwise it matches
/// at any depth (`*.sqlite-wal` is `**/*.sqlite-wal`). A trailing `/` restricts it to directories.
/// Unlike `.gitignore`, and like `.gitattributes`, a pattern that names a directory does not also
/// match what is inside it: write `dir/**` for that.
///
/// Matching works on bytes, so names that are not UTF-8 are matched (and never crash anything).
public struct PathPattern: Sendable, Hashable, CustomStringConvertible {
  /// The pattern as written.
  public let text: String
  /// Whether the pattern is anchored at the container root.
  public let isAnchored: Bool
  /// Whether the pattern matches directories only (it was written with a trailing `/`).
  public let matchesDirectoriesOnly: Bool
  package let segments: [Segment]
  /// For a pattern of literal components and a trailing `**` (`Documents/**`), those components:
  /// it matches exactly the paths strictly below them, whatever their names.
  package let literalPrefix: [[UInt8]]?
  /// The literal bytes that end the pattern's last component glob (`-wal` for `*-wal`): a path
  /// whose last component does not end with them cannot match, which is checked first.
  package let finalLiteralSuffix: [UInt8]

  /// One `/`-separated part of a pattern.
  package enum Segment: Sendable, Hashable {
    /// `**`: zero or more whole components (one or more when it ends the pattern).
    case anyComponents
    /// A component glob.
    case glob([Token])
  }

  /// One element of a component glob.
  package enum Token: Sendable, Hashable {
    case literal(UInt8)
    case anyCharacter
    case anyRun
    case set(CharacterSet, negated: Bool)
  }

  /// The members of a `[...]` set, as Unicode scalar ranges.
  package struct CharacterSet: Sendable, Hashable {
    var ranges: [ClosedRange<UInt32>]
    func contains(_ scalar: UInt32) -> Bool { ranges.contains { $0.contains(scalar) } }
  }

  /// Why a pattern could not be compiled: the byte offset in the pattern and what was expected there.
  public struct SyntaxError: Error, Sendable, Equatable {
    /// Zero-based byte offset into the pattern text.
    public var offset: Int
    /// What the parser expected, as a phrase ("a closing ']' …").
    public var expected: String
  }

  /// The pattern as written.
  public var description: String { text }

  /// Patterns are equal when written alike: the compiled form follows from the text alone, and
  /// hashing the text is much cheaper than hashing the compiled segments.
  public static func == (lhs: PathPattern, rhs: PathPattern) -> Bool { lhs.text == rhs.text }

  /// Hashes the text (see `==`).
  public func hash(into hasher: inout Hasher) { hasher.combine(text) }

  /// Compiles `text`, or throws where it is malformed.
  public init(_ text: String) throws(SyntaxError) {
    self.text = text
    var bytes = Array(text.utf8)
    if bytes.isEmpty { throw SyntaxError(offset: 0, expected: "a non-empty pattern") }
    var directoriesOnly = false
    if bytes.count > 1, bytes.last == UInt8(ascii: "/"), !Self.isEscaped(bytes, at: bytes.count - 1) {
      directoriesOnly = true
      bytes.removeLast()
    }
    var anchored = false
    if bytes.first == UInt8(ascii: "/") {
      anchored = true
      bytes.removeFirst()
    }
    // Split on unescaped slashes, remembering each part's offset for error columns.
    var parts: [(bytes: ArraySlice<UInt8>, offset: Int)] = []
    var start = 0
    var index = 0
    let shift = anchored ? 1 : 0
    while index < bytes.count {
      if bytes[index] == UInt8(ascii: "\\") {
        index += 2
        continue
      }
      if bytes[index] == UInt8(ascii: "/") {
        parts.append((bytes[start..<index], start + shift))
        start = index + 1
      }
      index += 1
    }
    parts.append((bytes[start..<min(index, bytes.count)], start + shift))
    if parts.count > 1 { anchored = true }
    var segments: [Segment] = []
    if !anchored { segments.append(.anyComponents) }
    for part in parts {
      if part.bytes.elementsEqual("**".utf8) {
        if segments.last != .anyComponents { segments.append(.anyComponents) }
      } else {
        segments.append(.glob(try Self.compile(part.bytes, offset: part.offset)))
      }
    }
    self.segments = segments
    isAnchored = anchored
    matchesDirectoriesOnly = directoriesOnly
    (literalPrefix, finalLiteralSuffix) = Self.shortcuts(segments)
  }

  /// The literal prefix of a `literal/.../**` pattern, and the trailing literals of the last glob.
  private static func shortcuts(_ segments: [Segment]) -> (prefix: [[UInt8]]?, suffix: [UInt8]) {
    var suffix: [UInt8] = []
    if case .glob(let tokens) = segments.last {
      for token in tokens.reversed() {
        guard case .literal(let byte) = token else { break }
        suffix.insert(byte, at: 0)
      }
    }
    guard segments.last == .anyComponents else { return (nil, suffix) }
    var prefix: [[UInt8]] = []
    for segment in segments.dropLast() {
      guard case .glob(let tokens) = segment else { return (nil, suffix) }
      var literal: [UInt8] = []
      for token in tokens {
        guard case .literal(let byte) = token else { return (nil, suffix) }
        literal.append(byte)
      }
      prefix.append(literal)
    }
    return (prefix, suffix)
  }

  private static func isEscaped(_ bytes: [UInt8], at index: Int) -> Bool {
    var count = 0
    var i = index - 1
    while i >= 0 && bytes[i] == UInt8(ascii: "\\") {
      count += 1
      i -= 1
    }
    return count % 2 == 1
  }

  private static func compile(_ part: ArraySlice<UInt8>, offset: Int) throws(SyntaxError) -> [Token] {
    var tokens: [Token] = []
    var i = part.startIndex
    while i < part.endIndex {
      let byte = part[i]
      switch byte {
      case UInt8(ascii: "\\"):
        guard i + 1 < part.endIndex else {
          throw SyntaxError(offset: offset + (i - part.startIndex), expected: "a character after '\\'")
        }
        tokens.append(.literal(part[i + 1]))
        i += 2
      case UInt8(ascii: "*"):
        if tokens.last != .anyRun { tokens.append(.anyRun) }
        i += 1
      case UInt8(ascii: "?"):
        tokens.append(.anyCharacter)
        i += 1
      case UInt8(ascii: "["):
        let (token, next) = try compileSet(part, from: i, offset: offset)
        tokens.append(token)
        i = next
      default:
        tokens.append(.literal(byte))
        i += 1
      }
    }
    return tokens
  }

  private static func compileSet(_ part: ArraySlice<UInt8>, from open: Int, offset: Int) throws(SyntaxError)
    -> (Token, Int)
  {
    var i = open + 1
    var negated = false
    if i < part.endIndex, part[i] == UInt8(ascii: "!") || part[i] == UInt8(ascii: "^") {
      negated = true
      i += 1
    }
    var ranges: [ClosedRange<UInt32>] = []
    var first = true
    while true {
      guard i < part.endIndex else {
        throw SyntaxError(offset: offset + (open - part.startIndex), expected: "a closing ']' for this '['")
      }
      if part[i] == UInt8(ascii: "]") && !first { break }
      first = false
      if part[i] == UInt8(ascii: "\\"), i + 1 < part.endIndex { i += 1 }
      guard let (low, lowNext) = decodeScalar(part, at: i) else {
        throw SyntaxError(offset: offset + (i - part.startIndex), expected: "valid UTF-8 in a '[...]' set")
      }
      i = lowNext
      if i + 1 < part.endIndex, part[i] == UInt8(ascii: "-"), part[i + 1] != UInt8(ascii: "]") {
        var highStart = i + 1
        if part[highStart] == UInt8(ascii: "\\"), highStart + 1 < part.endIndex { highStart += 1 }
        guard let (high, highNext) = decodeScalar(part, at: highStart), high >= low else {
          throw SyntaxError(
            offset: offset + (i - part.startIndex), expected: "a range whose end is not below its start")
        }
        ranges.append(low...high)
        i = highNext
      } else {
        ranges.append(low...low)
      }
    }
    return (.set(CharacterSet(ranges: ranges), negated: negated), i + 1)
  }

  /// Decodes one UTF-8 scalar at `index`; a byte that does not start valid UTF-8 counts as itself
  /// (`UTF8Scalar.decode`, which the display of names shares).
  package static func decodeScalar<C: Collection<UInt8>>(_ bytes: C, at index: C.Index) -> (UInt32, C.Index)? {
    UTF8Scalar.decode(bytes, at: index)
  }

  // MARK: Matching

  /// Whether the pattern matches the path whose components are `components` of `path`.
  ///
  /// `path` holds the components separated by `/`; `components` are their byte ranges in it.
  public func matches(
    _ path: UnsafeBufferPointer<UInt8>, components: UnsafeBufferPointer<Range<Int>>,
    isDirectory: Bool
  ) -> Bool {
    if matchesDirectoriesOnly && !isDirectory { return false }
    if !finalLiteralSuffix.isEmpty {
      guard let last = components.last, Self.hasSuffix(UnsafeBufferPointer(rebasing: path[last]), finalLiteralSuffix)
      else { return false }
    }
    return match(segment: 0, component: 0, path, components)
  }

  package static func hasSuffix(_ name: UnsafeBufferPointer<UInt8>, _ suffix: UnsafeBufferPointer<UInt8>) -> Bool {
    guard name.count >= suffix.count else { return false }
    let offset = name.count - suffix.count
    for index in 0..<suffix.count where name[offset + index] != suffix[index] { return false }
    return true
  }

  package static func hasSuffix(_ name: UnsafeBufferPointer<UInt8>, _ suffix: [UInt8]) -> Bool {
    guard name.count >= suffix.count else { return false }
    let offset = name.count - suffix.count
    for index in suffix.indices where name[offset + index] != suffix[index] { return false }
    return true
  }

  /// Convenience for tests and one-off checks: whether the pattern matches `relativePath`.
  public func matches(_ relativePath: String, isDirectory: Bool = false) -> Bool {
    let bytes = Array(relativePath.utf8)
    let ranges = Self.componentRanges(of: bytes)
    return bytes.withUnsafeBufferPointer { path in
      ranges.withUnsafeBufferPointer { matches(path, components: $0, isDirectory: isDirectory) }
    }
  }

  /// The byte ranges of the `/`-separated components of `path` (none for an empty path).
  package static func componentRanges(of path: [UInt8]) -> [Range<Int>] {
    guard !path.isEmpty else { return [] }
    var ranges: [Range<Int>] = []
    var start = 0
    for (index, byte) in path.enumerated() where byte == UInt8(ascii: "/") {
      ranges.append(start..<index)
      start = index + 1
    }
    ranges.append(start..<path.count)
    return ranges
  }

  private func match(
    segment: Int, component: Int, _ path: UnsafeBufferPointer<UInt8>,
    _ components: UnsafeBufferPointer<Range<Int>>
  ) -> Bool {
    var segment = segment
    var component = component
    while segment < segments.count {
      switch segments[segment] {
      case .anyComponents:
        let isLast = segment == segments.count - 1
        // A trailing `**` means "everything inside", so it needs at least one component.
        if isLast { return components.count - component >= 1 }
        var next = component
        while next < components.count {
          if match(segment: segment + 1, component: next, path, components) { return true }
          next += 1
        }
        return false
      case .glob(let tokens):
        guard component < components.count else { return false }
        let range = components[component]
        let name = UnsafeBufferPointer(rebasing: path[range])
        if !Self.glob(tokens, name) { return false }
        segment += 1
        component += 1
      }
    }
    return component == components.count
  }

  /// Matches a component against glob tokens, backtracking on the last `*` (linear in practice).
  package static func glob(_ tokens: [Token], _ name: UnsafeBufferPointer<UInt8>) -> Bool {
    // Trailing literals must end the name: checking them first rejects most names at once
    // (`*-wal` against `photo.jpg`) without the backtracking loop.
    var tokenEnd = tokens.count
    var nameEnd = name.count
    while tokenEnd > 0, case .literal(let byte) = tokens[tokenEnd - 1] {
      guard nameEnd > 0, name[nameEnd - 1] == byte else { return false }
      tokenEnd -= 1
      nameEnd -= 1
    }
    var t = 0
    var n = 0
    var starToken = -1
    var starName = 0
    while n < nameEnd {
      if t < tokenEnd {
        switch tokens[t] {
        case .literal(let byte):
          if name[n] == byte {
            t += 1
            n += 1
            continue
          }
        case .anyCharacter:
          if let (_, next) = decodeScalar(name[..<nameEnd], at: n) {
            t += 1
            n = next
            continue
          }
        case .anyRun:
          starToken = t
          starName = n
          t += 1
          continue
        case .set(let set, let negated):
          if let (scalar, next) = decodeScalar(name[..<nameEnd], at: n), set.contains(scalar) != negated {
            t += 1
            n = next
            continue
          }
        }
      }
      guard starToken >= 0 else { return false }
      // Let the last `*` swallow one more character and retry after it.
      t = starToken + 1
      starName += 1
      n = starName
    }
    while t < tokenEnd, tokens[t] == .anyRun { t += 1 }
    return t == tokenEnd
  }

  // MARK: Static analysis

  /// Why this pattern can never match a path, or nil when it can.
  ///
  /// Paths never hold `.`, `..` or empty components.
  public var neverMatchesReason: String? {
    for segment in segments {
      guard case .glob(let tokens) = segment else { continue }
      if tokens.isEmpty { return "it has an empty component ('//'), which no path has" }
      if tokens == [.literal(UInt8(ascii: "."))] { return "it has a '.' component, which no path has" }
      if tokens == [.literal(UInt8(ascii: ".")), .literal(UInt8(ascii: "."))] {
        return "it has a '..' component, which no path has"
      }
    }
    return nil
  }

  /// Whether the pattern matches every path (`**` or `*` unanchored), so that it hides earlier rules.
  public var matchesEverything: Bool {
    guard !matchesDirectoriesOnly else { return false }
    if segments == [.anyComponents] { return true }
    if segments == [.anyComponents, .glob([.anyRun])] { return true }
    return false
  }
}
