import Foundation
import ProtFS
import ProtFSSystem

/// The audit's visitor: one per walking thread, with its own path buffer and finding batch;
/// nothing shared but the sink.
///
/// `@unchecked Sendable`: the template handed to the threads has no candidate memory yet; each
/// thread's copy allocates its own on its first directory.
package struct Worker: @unchecked Sendable {
  package let walk: ContainerWalk
  package var rootFD: Int32
  package let matcher: RuleMatcher
  /// The patterns that may match entries of the current directory, policy after policy
  /// (`candidateEnds[p]` is where policy `p`'s end): plain memory this worker allocates on its
  /// first directory and frees in `finish()`, so that the per-item loop counts no references.
  package var candidateBuffer = UnsafeMutableBufferPointer<RuleMatcher.Candidate>(start: nil, count: 0)
  package var candidateEnds = UnsafeMutableBufferPointer<Int>(start: nil, count: 0)
  /// Messages already built, by rule and actual class: most findings repeat one.
  package var ruleTexts: [[CachedText?]]
  package var noOwnClassTexts = [CachedText?](repeating: nil, count: 15)
  package let owned: Set<String>
  package var summary = AuditSummary()
  /// Findings by level (note, warning, error), counted without hashing; folded into `summary` at the end.
  private var levelCounts = [0, 0, 0]
  private var batch: [AuditFinding] = []
  /// The current item's path below the container root.
  package var path: [UInt8] = []
  /// The byte ranges of `path`'s components.
  package var components: [Range<Int>] = []
  /// How many of `components` are the current directory's.
  package var directoryComponents = 0
  package let prefix: [UInt8]
  /// Whether a file / directory of each class (by strength) may be locked out now: looked up per item.
  package let mayBeLockedOut: (files: [Bool], directories: [Bool])
  /// The keys of the container's sealed device; nil for an unsealed one, whose files have no key.
  package let seal: AuditSeal?

  package static let classAttribute = Array(AttributeName.protectionClass.utf8CString)
  package static let temporaryPrefix = Array("CFNetworkDownload_".utf8)
  package static let temporarySuffix = Array(".tmp".utf8)

  package init(
    walk: ContainerWalk, lockState: any LockExpectation, rootFD: Int32, matcher: RuleMatcher, owned: Set<String>,
    seal: AuditSeal? = nil
  ) {
    self.walk = walk
    self.seal = seal
    self.rootFD = rootFD
    self.matcher = matcher
    self.owned = owned
    prefix = Array(walk.unit.displayPrefix.utf8)
    ruleTexts = matcher.policies.map { [CachedText?](repeating: nil, count: $0.rules.count * 15) }
    mayBeLockedOut = (
      ProtectionClass.byStrength.map { lockState.mayBeLockedOut(.file, $0) },
      ProtectionClass.byStrength.map { lockState.mayBeLockedOut(.directory, $0) }
    )
  }

  package mutating func finish() -> AuditSummary {
    if candidateBuffer.baseAddress != nil {
      candidateBuffer.deallocate()
      candidateEnds.deallocate()
      candidateBuffer = UnsafeMutableBufferPointer(start: nil, count: 0)
      candidateEnds = UnsafeMutableBufferPointer(start: nil, count: 0)
    }
    walk.sink.deliver(batch)
    batch.removeAll()
    for (level, count) in zip([AuditLevel.note, .warning, .error], levelCounts) where count > 0 {
      summary.findings[level, default: 0] += count
    }
    levelCounts = [0, 0, 0]
    return summary
  }

  // MARK: Findings

  package mutating func emit(_ check: BuiltInCheck, _ message: String, expected: String? = nil, actual: String? = nil) {
    emit(id: check.rawValue, level: check.level, message, expected: expected, actual: actual)
  }

  package mutating func emit(id: String, level: AuditLevel, _ message: String, expected: String?, actual: String?) {
    batch.append(
      AuditFinding(
        ruleID: id, level: level, container: walk.unit.name, pathBytes: prefix + path,
        containerPathOffset: prefix.count, message: message, expected: expected, actual: actual))
    levelCounts[level == .note ? 0 : level == .warning ? 1 : 2] += 1
    if batch.count >= 256 {
      walk.sink.deliver(batch)
      batch.removeAll(keepingCapacity: true)
    }
  }

  package mutating func unreadable(_ operation: String, errno code: Int32) {
    summary.incomplete = true
    let what = path.isEmpty ? "the container '\(walk.unit.absolutePath)'" : "'\(DisplayPath.text(prefix + path))'"
    emit(.unreadable, "Cannot \(operation) \(what): \(String(cString: strerror(code))); the audit is incomplete.")
  }

  // MARK: Attributes

  /// Reads a class attribute of `name` in `dirfd` (of `dirfd` itself when nil), never following a symlink.
  package func classAttribute(_ attribute: String, dirfd: Int32, name: UnsafePointer<CChar>?) -> ClassReading {
    attribute.withCString { attributeName in
      classAttribute(attributeName, dirfd: dirfd, name: name)
    }
  }

  package func classAttribute(_ attribute: UnsafePointer<CChar>, dirfd: Int32, name: UnsafePointer<CChar>?)
    -> ClassReading
  {
    withUnsafeTemporaryAllocation(byteCount: 96, alignment: 1) { buffer in
      switch Kernel.getAttribute(dirfd: dirfd, rawName: name, attribute: attribute, into: buffer) {
      case .success(let size):
        let bytes = UnsafeRawBufferPointer(rebasing: buffer[..<size])
        if let value = ProtectionClass(attributeBytes: bytes) { return .value(value) }
        return .corrupt(String(decoding: bytes.prefix(64), as: UTF8.self).debugDescription)
      case .failure(.noData): return .absent
      case .failure(.range): return .corrupt("a value longer than 96 bytes")
      case .failure(let e) where e.rawValue == ENOENT: return .vanished
      case .failure(let e): return .failed(e.rawValue)
      }
    }
  }

  /// Whether `name` in `dirfd` carries a saved-mode attribute: presence is what the audit checks.
  package func hasSavedMode(dirfd: Int32, name: UnsafePointer<CChar>) -> Bool {
    (try? SavedModeRecord.presence(dirfd: dirfd, name: name).get()) ?? false
  }
}

extension Worker: TreeVisitor {
  /// Sets the path to the directory's and finds the patterns that may match its entries.
  package mutating func enter(_ directory: DirectoryHandle, _ context: AuditDirectory) {
    path = context.path
    components = PathPattern.componentRanges(of: path)
    directoryComponents = components.count
    // Allocated here, not in init: each thread's worker is a copy of one template.
    if candidateBuffer.baseAddress == nil {
      candidateBuffer = .allocate(capacity: max(1, matcher.patternCount))
      candidateEnds = .allocate(capacity: max(1, matcher.policies.count))
    }
    let (buffer, ends) = (candidateBuffer, candidateEnds)
    path.withUnsafeBufferPointer { pathBuffer in
      components.withUnsafeBufferPointer { matcher.candidates(pathBuffer, components: $0, into: buffer, ends: ends) }
    }
  }

  /// Checks one entry, whose path is the directory's plus its name.
  package mutating func visit(_ entry: inout TreeEntry, in context: AuditDirectory) -> TreeStep<AuditDirectory> {
    let namePointer = entry.name
    let length = strlen(namePointer)
    let base = context.path.count
    path.removeSubrange(base...)
    components.removeSubrange(directoryComponents...)
    if base > 0 { path.append(UInt8(ascii: "/")) }
    let start = path.count
    namePointer.withMemoryRebound(to: UInt8.self, capacity: length) {
      path.append(contentsOf: UnsafeBufferPointer(start: $0, count: length))
    }
    components.append(start..<path.count)
    summary.items += 1
    // Unknown after the walker's stat: the entry vanished.
    guard entry.kind != .unknown else { return .skip }
    let nameBytes = UnsafeRawPointer(namePointer).assumingMemoryBound(to: UInt8.self)
    guard
      let own = check(
        dirfd: entry.directory.fd, name: namePointer, nameBytes: UnsafeBufferPointer(start: nameBytes, count: length),
        nameStart: start, kind: entry.kind, inheritance: entry.inheritance)
    else { return .skip }
    entry.ownClass = own
    return .descend(AuditDirectory(path: path))
  }

  /// Reports a directory that cannot be opened or listed; the audit goes on, marked incomplete.
  package mutating func failed(_ error: ProtFSError, in context: AuditDirectory) -> Bool {
    path = context.path
    unreadable("read the directory", errno: error.errno ?? EIO)
    return true
  }
}
