import CAttr
import CProtFSSys
import Foundation
import ProtFS
import ProtFSSystem

/// A directory waiting to be read, named by its path below the container root.
package struct PendingDirectory {
  /// The path below the container root, `/`-separated bytes; empty for the root.
  package var path: [UInt8]
  /// The class its children inherit when they have none of their own (nil: the container default).
  package var inheritedByChildren: ProtectionClass?
}

/// The directories left to read, shared by the workers of one container.
///
/// A stack rather than a queue keeps the walk depth-first, so the pending list stays as small as the
/// tree is wide along one path, whatever the size of the tree.
package final class WorkStack: @unchecked Sendable {
  private let condition = NSCondition()
  private var pending: [PendingDirectory]
  private var busy = 0

  package init(_ first: PendingDirectory) { pending = [first] }

  /// The next directory, waiting while other workers may still add some; nil when the walk is over.
  package func pop() -> PendingDirectory? {
    condition.lock()
    defer { condition.unlock() }
    while pending.isEmpty {
      if busy == 0 { return nil }
      condition.wait()
    }
    busy += 1
    return pending.removeLast()
  }

  /// Adds the subdirectories found in one directory and marks that directory done.
  package func finish(adding found: [PendingDirectory]) {
    condition.lock()
    defer { condition.unlock() }
    pending.append(contentsOf: found)
    busy -= 1
    condition.broadcast()
  }
}

/// The audit of one container: setup on the calling thread, then workers that share a `WorkStack`.
package struct ContainerWalk: Sendable {
  package let unit: AuditTarget.Unit
  package let configuration: AuditConfiguration
  package let matcher: RuleMatcher
  package let sink: FindingSink

  package func run() -> AuditSummary {
    var setup = Worker(
      walk: self, lockState: AuditLockState.unknown, rootFD: -1, matcher: matcher, containerDefault: .containerDefault,
      owned: [])
    let rootFD = open(unit.absolutePath, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    if rootFD < 0 {
      setup.unreadable("open the container", errno: errno)
      return setup.finish()
    }
    defer { close(rootFD) }
    setup.rootFD = rootFD

    var containerDefault = ProtectionClass.containerDefault
    switch setup.classAttribute(AttributeName.defaultClass, dirfd: rootFD, name: nil) {
    case .value(let value): containerDefault = value
    case .corrupt(let shown):
      setup.emit(
        .corruptClass,
        "The container's default class (\(AttributeName.defaultClass)) holds \(shown), which is not a protection class; class C applies.",
        actual: shown)
    case .absent, .vanished: break
    case .failed(let code): setup.unreadable("read the default class of", errno: code)
    }
    if let wanted = configuration.entitlementsDefault, wanted != containerDefault {
      setup.emit(
        .defaultClassMismatch,
        "The container's default class is \(containerDefault.shortName) but the entitlements ask for \(wanted.shortName).",
        expected: "= \(wanted.shortName)", actual: containerDefault.shortName)
    }
    var rootOwn: ProtectionClass?
    switch setup.classAttribute(AttributeName.protectionClass, dirfd: rootFD, name: nil) {
    case .value(let value): rootOwn = value
    case .corrupt(let shown):
      setup.emit(
        .corruptClass, "The container root's class holds \(shown), which is not a protection class.", actual: shown)
    case .absent, .vanished: break
    case .failed(let code): setup.unreadable("read the class of", errno: code)
    }
    var owned: Set<String> = []
    do {
      // A tree outside a device, or whose name is not a bundle id, has no task store.
      if let device = unit.device, let bundleID = try? BundleID(unit.name) {
        owned = Set(try configuration.downloadTasks(device).tasks(for: bundleID).compactMap(\.temporaryFileName))
      }
    } catch {
      setup.emit(.unreadable, "Cannot tell which temp downloads have a task: \(error.description)")
      setup.summary.incomplete = true
    }

    let lockState = self.lockState(&setup)
    let stack = WorkStack(PendingDirectory(path: [], inheritedByChildren: rootOwn ?? unit.inheritedClass))
    let results = Results()
    let threads = configuration.threads
    let template = Worker(
      walk: self, lockState: lockState, rootFD: rootFD, matcher: matcher, containerDefault: containerDefault,
      owned: owned)
    DispatchQueue.concurrentPerform(iterations: threads) { _ in
      var worker = template
      while let directory = stack.pop() {
        let found = worker.read(directory)
        stack.finish(adding: found)
      }
      results.add(worker.finish())
    }
    var summary = setup.finish()
    summary.merge(results.total)
    return summary
  }
}

extension ContainerWalk {
  /// The lock state to judge locked-out items by: the configuration's, else the device's record.
  fileprivate func lockState(_ setup: inout Worker) -> any LockExpectation {
    if let given = configuration.lockState { return given }
    guard let device = unit.device, device.isInitialized else { return AuditLockState.unknown }
    if LockStore.hasJournal(device) {
      setup.emit(
        .lockedOut,
        "A lock transition of the device '\(device.root)' was interrupted, so items may be locked out; run any protfs command on the device to finish it.",
        expected: "no interrupted transition", actual: "transition.json present")
      return TransitionInProgress()
    }
    do {
      return try LockStore(device).record(now: Date()).protection
    } catch {
      setup.emit(.unreadable, "Cannot read the lock state of the device '\(device.root)': \(error.description)")
      setup.summary.incomplete = true
      return AuditLockState.unknown
    }
  }
}

/// Collects the workers' summaries.
package final class Results: @unchecked Sendable {
  private let lock = NSLock()
  private var summary = AuditSummary()
  package func add(_ other: AuditSummary) {
    lock.lock()
    summary.merge(other)
    lock.unlock()
  }
  package var total: AuditSummary {
    lock.lock()
    defer { lock.unlock() }
    return summary
  }
}

/// A finding's texts, built once per rule, class and source: most findings repeat one.
package struct CachedText {
  package var message: String
  package var actual: String
  package var expected: String?

  /// The slot of a class and its source in a per-rule table of 15.
  package static func slot(_ effective: ProtectionClass, _ source: ClassSource) -> Int {
    let sourceIndex =
      switch source {
      case .own: 0
      case .inherited: 1
      case .default: 2
      }
    return effective.strength * 3 + sourceIndex
  }
}

/// What reading a class attribute gave.
package enum ClassReading {
  case value(ProtectionClass)
  case absent
  case corrupt(String)
  case vanished
  case failed(Int32)
}

/// One walking thread: its own path buffer and finding batch; nothing shared but the stack and the sink.
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
  private var candidateBuffer = UnsafeMutableBufferPointer<RuleMatcher.Candidate>(start: nil, count: 0)
  private var candidateEnds = UnsafeMutableBufferPointer<Int>(start: nil, count: 0)
  /// Messages already built, by rule and actual class: most findings repeat one.
  private var ruleTexts: [[CachedText?]]
  private var noOwnClassTexts = [CachedText?](repeating: nil, count: 15)
  package let containerDefault: ProtectionClass
  package let owned: Set<String>
  package var summary = AuditSummary()
  /// Findings by level (note, warning, error), counted without hashing; folded into `summary` at the end.
  private var levelCounts = [0, 0, 0]
  private var batch: [AuditFinding] = []
  /// The current item's path below the container root.
  private var path: [UInt8] = []
  /// The byte ranges of `path`'s components.
  private var components: [Range<Int>] = []
  private let prefix: [UInt8]
  /// Whether a file / directory of each class (by strength) may be locked out now: looked up per item.
  private let mayBeLockedOut: (files: [Bool], directories: [Bool])

  private static let classAttribute = Array(AttributeName.protectionClass.utf8CString)
  private static let savedModeAttribute = Array(AttributeName.savedMode.utf8CString)
  private static let temporaryPrefix = Array("CFNetworkDownload_".utf8)
  private static let temporarySuffix = Array(".tmp".utf8)

  package init(
    walk: ContainerWalk, lockState: any LockExpectation, rootFD: Int32, matcher: RuleMatcher,
    containerDefault: ProtectionClass,
    owned: Set<String>
  ) {
    self.walk = walk
    self.rootFD = rootFD
    self.matcher = matcher
    self.containerDefault = containerDefault
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

  package func classAttribute(_ attribute: UnsafePointer<CChar>, dirfd: Int32, name: UnsafePointer<CChar>?) -> ClassReading {
    withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 96) { buffer in
      let size = Self.getAttribute(dirfd: dirfd, name: name, attribute: attribute, buffer: buffer)
      if size >= 0 {
        let bytes = UnsafeBufferPointer(rebasing: buffer[..<size])
        if let value = Self.decodeClass(bytes) { return .value(value) }
        return .corrupt(String(decoding: bytes.prefix(64), as: UTF8.self).debugDescription)
      }
      switch Int32(-size) {
      case ENODATA: return .absent
      case ERANGE: return .corrupt("a value longer than 96 bytes")
      case ENOENT: return .vanished
      default: return .failed(Int32(-size))
      }
    }
  }

  /// Decodes a class from attribute bytes without building a `String` (the hot path): the five
  /// values have five different lengths, so the length picks the one to compare with.
  package static func decodeClass(_ bytes: UnsafeBufferPointer<UInt8>) -> ProtectionClass? {
    let candidate: ProtectionClass
    switch bytes.count {
    case 20: candidate = .none
    case 24: candidate = .complete
    case 34: candidate = .completeUnlessOpen
    case 40: candidate = .completeWhenUserInactive
    case 52: candidate = .completeUntilFirstUserAuthentication
    default: return nil
    }
    let matches = candidate.rawValue.utf8.withContiguousStorageIfAvailable {
      memcmp($0.baseAddress!, bytes.baseAddress!, bytes.count) == 0
    }
    return (matches ?? candidate.rawValue.utf8.elementsEqual(bytes)) ? candidate : nil
  }

  /// `getxattrat(2)` with `AT_SYMLINK_NOFOLLOW`, or its fallback; the size, or minus the errno.
  package static func getAttribute(
    dirfd: Int32, name: UnsafePointer<CChar>?, attribute: UnsafePointer<CChar>,
    buffer: UnsafeMutableBufferPointer<UInt8>
  ) -> Int {
    while true {
      let result: Int
      if let name {
        if Kernel.hasXattrAt {
          result = protfs_getxattrat(
            dirfd, name, UInt32(AT_SYMLINK_NOFOLLOW), attribute, buffer.baseAddress, buffer.count)
        } else {
          let proc = "/proc/self/fd/\(dirfd)/" + String(cString: name)
          result = lgetxattr(proc, attribute, buffer.baseAddress, buffer.count)
        }
      } else {
        result = fgetxattr(dirfd, attribute, buffer.baseAddress, buffer.count)
      }
      if result >= 0 { return result }
      if errno != EINTR { return -Int(errno) }
    }
  }

  // MARK: Walking

  /// Reads one directory, checks each entry, and returns its subdirectories.
  package mutating func read(_ directory: PendingDirectory) -> [PendingDirectory] {
    path = directory.path
    components = PathPattern.componentRanges(of: path)
    // Allocated here, not in init: each thread's worker is a copy of one template.
    if candidateBuffer.baseAddress == nil {
      candidateBuffer = .allocate(capacity: max(1, matcher.patternCount))
      candidateEnds = .allocate(capacity: max(1, matcher.policies.count))
    }
    let (buffer, ends) = (candidateBuffer, candidateEnds)
    path.withUnsafeBufferPointer { pathBuffer in
      components.withUnsafeBufferPointer { matcher.candidates(pathBuffer, components: $0, into: buffer, ends: ends) }
    }
    let fd = openBeneath(directory.path)
    guard fd >= 0 else {
      unreadable("read the directory", errno: -fd)
      return []
    }
    let handle = DirectoryHandle(fd: fd, path: walk.unit.absolutePath + "/" + DisplayPath.text(directory.path))
    let base = directory.path.count
    let baseComponents = components.count
    var found: [PendingDirectory] = []
    do throws(ProtFSError) {
      try handle.forEachRawEntry { namePointer, direntKind in
        let length = strlen(namePointer)
        path.removeSubrange(base...)
        components.removeSubrange(baseComponents...)
        if base > 0 { path.append(UInt8(ascii: "/")) }
        let start = path.count
        namePointer.withMemoryRebound(to: UInt8.self, capacity: length) {
          path.append(contentsOf: UnsafeBufferPointer(start: $0, count: length))
        }
        components.append(start..<path.count)
        summary.items += 1
        var kind = direntKind
        if kind == .unknown {
          var st = stat()
          guard fstatat(handle.fd, namePointer, &st, AT_SYMLINK_NOFOLLOW) == 0 else { return }
          kind = FileKind(mode: st.st_mode)
        }
        let nameBytes = UnsafeRawPointer(namePointer).assumingMemoryBound(to: UInt8.self)
        if let child = check(
          dirfd: handle.fd, name: namePointer, nameBytes: UnsafeBufferPointer(start: nameBytes, count: length),
          nameStart: start, kind: kind, inherited: directory.inheritedByChildren)
        {
          found.append(child)
        }
      }
    } catch {
      path = directory.path
      unreadable("read the directory", errno: error.errno ?? EIO)
    }
    return found
  }

  /// Opens the directory at `relative` below the container root without following any symlink.
  private func openBeneath(_ relative: [UInt8]) -> Int32 {
    if relative.isEmpty {
      let fd = openat(rootFD, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
      return fd >= 0 ? fd : -errno
    }
    let flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC
    let fd = (relative + [0]).withUnsafeBufferPointer { bytes in
      bytes.withMemoryRebound(to: CChar.self) { path in
        protfs_openat2(rootFD, path.baseAddress!, flags, UInt64(PROTFS_RESOLVE_BENEATH | PROTFS_RESOLVE_NO_SYMLINKS))
      }
    }
    if fd >= 0 { return fd }
    if errno != ENOSYS && errno != ENAMETOOLONG { return -errno }
    // Kernels before 5.6, and paths longer than PATH_MAX: one no-follow openat per component.
    var current = dup(rootFD)
    for component in relative.split(separator: UInt8(ascii: "/")) {
      let next = (Array(component) + [0]).withUnsafeBufferPointer { bytes in
        bytes.withMemoryRebound(to: CChar.self) { openat(current, $0.baseAddress!, flags) }
      }
      let code = errno
      close(current)
      if next < 0 { return -code }
      current = next
    }
    return current
  }

  // MARK: Checks

  /// Checks the entry whose path is in `path`; returns it as a pending directory when it is one.
  private mutating func check(
    dirfd: Int32, name: UnsafePointer<CChar>, nameBytes name8: UnsafeBufferPointer<UInt8>, nameStart: Int,
    kind: FileKind, inherited: ProtectionClass?
  ) -> PendingDirectory? {
    let nameBytes = path[nameStart...]
    if !DisplayPath.isValidUTF8(nameBytes) {
      emit(
        .nonUTF8Name,
        "The name is not valid UTF-8 (shown with \\xNN escapes); iOS file names are always UTF-8.")
    }
    switch kind {
    case .symlink:
      checkSymlink(dirfd: dirfd, name: name)
      return nil
    case .other, .unknown:
      return nil
    case .file, .directory:
      break
    }

    var own: ProtectionClass?
    var hasAttribute = true
    switch classAttribute(Self.classAttribute, dirfd: dirfd, name: name) {
    case .value(let value): own = value
    case .absent: hasAttribute = false
    case .corrupt(let shown):
      emit(
        .corruptClass,
        "The attribute \(AttributeName.protectionClass) holds \(shown), which is not a protection class.",
        actual: shown)
    case .vanished: return nil
    case .failed(let code):
      unreadable("read the class of", errno: code)
      return nil
    }
    let effective = own ?? inherited ?? containerDefault
    let source: ClassSource = own != nil ? .own : inherited != nil ? .inherited : .default
    if !hasAttribute {
      let slot = CachedText.slot(effective, source)
      let text: CachedText
      if let cached = noOwnClassTexts[slot] {
        text = cached
      } else {
        let actual = "\(effective.shortName) (\(source.rawValue))"
        text = CachedText(message: "The item has no class of its own; it gets \(actual).", actual: actual)
        noOwnClassTexts[slot] = text
      }
      emit(.noOwnClass, text.message, actual: text.actual)
    }

    var hasSavedMode = false
    let checkLockedOut =
      !(kind == .directory ? mayBeLockedOut.directories : mayBeLockedOut.files)[effective.strength]
    if checkLockedOut {
      // A second getxattrat: measured cheaper than one listxattrat plus a getxattrat for labelled items.
      // Presence is what matters here; a value too long for any record (ERANGE) is present too.
      hasSavedMode = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: SavedModeRecord.maximumLength) { buffer in
        Self.getAttribute(dirfd: dirfd, name: name, attribute: Self.savedModeAttribute, buffer: buffer) >= 0
          || errno == ERANGE
      }
      if hasSavedMode {
        emit(
          .lockedOut,
          "The item still carries \(AttributeName.savedMode) from a lock although its class (\(effective.shortName)) is available in the device's state, so its permission bits were not restored.",
          expected: "no \(AttributeName.savedMode)", actual: "\(AttributeName.savedMode) present")
      }
    }

    var st = stat()
    let statted = kind == .file && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0
    if statted {
      if st.st_nlink > 1 {
        emit(
          .hardLinked,
          "The file has \(st.st_nlink) links; one may be outside the device, so a lock leaves it unchanged and its class is not enforced.",
          expected: "1 link", actual: "\(st.st_nlink) links")
      }
      if UInt32(st.st_mode) & 0o6000 != 0 {
        let mode = FilePermissions(rawValue: UInt32(st.st_mode)).octal
        emit(
          .setID, "The file is setuid or setgid (mode \(mode)); whoever runs it gets its owner's or group's rights.",
          expected: "no setuid/setgid bits", actual: mode)
      }
    }
    if statted, effective == .complete || effective == .completeUnlessOpen {
      let mode = UInt32(st.st_mode) & 0o777
      if mode & 0o044 != 0 {
        emit(
          .protectedFileReadableByOthers,
          "The file is \(effective.shortName) but its mode \(FilePermissions(rawValue: mode).octal) lets its group or others read it.",
          expected: "no group/other read bits", actual: FilePermissions(rawValue: mode).octal)
      }
      if checkLockedOut, !hasSavedMode, mode == 0 {
        emit(
          .lockedOut,
          "The file's permission bits are all stripped (mode 0000), as a lock leaves them, although its class (\(effective.shortName)) is available in the device's state.",
          expected: "the file's original mode", actual: "0000")
      }
    }

    if kind == .file, nameBytes.starts(with: Self.temporaryPrefix),
      nameBytes.reversed().starts(with: Self.temporarySuffix.reversed())
    {
      let text = String(decoding: nameBytes, as: UTF8.self)
      if !owned.contains(text) {
        emit(
          .orphanTemporaryDownload, "The background-download temp file belongs to no download task.",
          expected: "a task that owns it", actual: "no task")
      }
    }

    evaluatePolicies(
      dirfd: dirfd, name: name8, nameStart: nameStart, kind: kind, effective: effective, source: source,
      inherited: inherited)

    guard kind == .directory else { return nil }
    return PendingDirectory(path: path, inheritedByChildren: own ?? inherited)
  }

  /// The rule of policy `policyIndex` that decides the current item (whose name is `name`) and
  /// its facts, or nil: the first candidate pattern that matches. Most candidates decide from
  /// their plain data alone (every child matches, or the name lacks the literal suffix); only the
  /// rest run the full match.
  private func winningRule(_ policyIndex: Int, name: UnsafeBufferPointer<UInt8>, isDirectory: Bool)
    -> (Int, RuleMatcher.RuleFacts)?
  {
    let start = policyIndex == 0 ? 0 : candidateEnds[policyIndex - 1]
    for position in start..<candidateEnds[policyIndex] {
      let candidate = candidateBuffer[position]
      if candidate.directoriesOnly && !isDirectory { continue }
      if candidate.matchesEveryChild { return (candidate.owner, candidate.facts) }
      if !PathPattern.hasSuffix(name, candidate.suffix) { continue }
      let matches = path.withUnsafeBufferPointer { pathBuffer in
        components.withUnsafeBufferPointer { componentBuffer in
          matcher.policies[policyIndex].patterns[candidate.index].matches(
            pathBuffer, components: componentBuffer, isDirectory: isDirectory)
        }
      }
      if matches { return (candidate.owner, candidate.facts) }
    }
    return nil
  }

  private mutating func evaluatePolicies(
    dirfd: Int32, name: UnsafeBufferPointer<UInt8>, nameStart: Int, kind: FileKind, effective: ProtectionClass,
    source: ClassSource, inherited: ProtectionClass?
  ) {
    let isDirectory = kind == .directory
    for policyIndex in 0..<candidateEnds.count {
      guard let (winner, facts) = winningRule(policyIndex, name: name, isDirectory: isDirectory) else { continue }
      let satisfied = facts.satisfiedBy & (1 << effective.strength) != 0
      if satisfied && !facts.comparesWithSibling { continue }
      let policy = matcher.policies[policyIndex]
      let requirement = policy.rules[winner].requirement
      if case .sameAsSiblingWithout(let suffix) = requirement {
        let rule = policy.rules[winner]
        checkSibling(
          rule, suffix: suffix, dirfd: dirfd, nameStart: nameStart, effective: effective,
          inherited: inherited, actual: "\(effective.shortName) (\(source.rawValue))")
      } else if !satisfied {
        let slot = winner * 15 + CachedText.slot(effective, source)
        let rule = policy.rules[winner]
        let text: CachedText
        if let cached = ruleTexts[policyIndex][slot] {
          text = cached
        } else {
          let actual = "\(effective.shortName) (\(source.rawValue))"
          text = CachedText(
            message: "The class is \(actual); rule \(rule.id) requires \(rule.requirement). \(rule.message)",
            actual: actual, expected: rule.requirement.description)
          ruleTexts[policyIndex][slot] = text
        }
        emit(id: rule.id, level: rule.level, text.message, expected: text.expected, actual: text.actual)
      }
    }
  }

  private mutating func checkSibling(
    _ rule: PolicyRule, suffix: String, dirfd: Int32, nameStart: Int,
    effective: ProtectionClass, inherited: ProtectionClass?, actual: String
  ) {
    let suffixBytes = Array(suffix.utf8)
    let name = Array(path[nameStart...])
    guard name.count > suffixBytes.count, name.suffix(suffixBytes.count).elementsEqual(suffixBytes) else { return }
    let stem = Array(name.dropLast(suffixBytes.count))
    let reading = (stem.map { CChar(bitPattern: $0) } + [0]).withUnsafeBufferPointer {
      classAttribute(Self.classAttribute, dirfd: dirfd, name: $0.baseAddress!)
    }
    let siblingClass: ProtectionClass
    switch reading {
    case .value(let value): siblingClass = value
    case .absent: siblingClass = inherited ?? containerDefault
    case .vanished, .corrupt, .failed: return  // no database, or a problem reported on the database itself
    }
    if siblingClass != effective {
      let stemText = DisplayPath.text(stem)
      emit(
        id: rule.id, level: rule.level,
        "The class is \(actual) but its database '\(stemText)' is \(siblingClass.shortName); rule \(rule.id) requires the same class. \(rule.message)",
        expected: "= \(siblingClass.shortName) (as \(stemText))", actual: actual)
    }
  }

  /// Reports a link that leaves the container or loops. The kernel resolves it with `RESOLVE_BENEATH`,
  /// which fails with EXDEV exactly when resolution would leave the container root.
  private mutating func checkSymlink(dirfd: Int32, name: UnsafePointer<CChar>) {
    let fd = (path + [0]).withUnsafeBufferPointer { bytes in
      bytes.withMemoryRebound(to: CChar.self) { relative in
        protfs_openat2(
          rootFD, relative.baseAddress!, PROTFS_O_PATH | O_CLOEXEC,
          UInt64(PROTFS_RESOLVE_BENEATH | PROTFS_RESOLVE_NO_MAGICLINKS))
      }
    }
    if fd >= 0 {
      close(fd)
      return
    }
    let code = errno
    let target = readLink(dirfd: dirfd, name: name)
    switch code {
    case ELOOP:
      emit(
        .symlinkLoop, "The symbolic link loops (it points to '\(DisplayPath.text(target))' and never resolves).",
        actual: DisplayPath.text(target))
    case EXDEV:
      if lexicallyInside(target) { return }
      emit(
        .symlinkLeavesContainer, "The symbolic link points outside its container, to '\(DisplayPath.text(target))'.",
        expected: "a target inside the container", actual: DisplayPath.text(target))
    case ENOENT, ENOTDIR:
      // Dangling: decide from the text of the link alone.
      if !lexicallyInside(target) {
        emit(
          .symlinkLeavesContainer,
          "The symbolic link points outside its container, to '\(DisplayPath.text(target))' (which does not exist).",
          expected: "a target inside the container", actual: DisplayPath.text(target))
      }
    case ENOSYS, ENAMETOOLONG:
      if !lexicallyInside(target) {
        emit(
          .symlinkLeavesContainer, "The symbolic link points outside its container, to '\(DisplayPath.text(target))'.",
          expected: "a target inside the container", actual: DisplayPath.text(target))
      }
    default:
      break
    }
  }

  private func readLink(dirfd: Int32, name: UnsafePointer<CChar>) -> [UInt8] {
    var buffer = [UInt8](repeating: 0, count: 4096)
    let count = buffer.withUnsafeMutableBufferPointer { raw in
      raw.withMemoryRebound(to: CChar.self) { readlinkat(dirfd, name, $0.baseAddress!, $0.count) }
    }
    return count > 0 ? Array(buffer.prefix(count)) : []
  }

  /// Whether `target`, read from the link at `path`, stays inside the container by its text alone.
  private func lexicallyInside(_ target: [UInt8]) -> Bool {
    if target.first == UInt8(ascii: "/") {
      let root = Array(walk.unit.absolutePath.utf8)
      return target == root
        || (target.starts(with: root) && target.count > root.count
          && target[root.count] == UInt8(ascii: "/"))
    }
    var depth = components.count - 1  // the link's directory
    for component in target.split(separator: UInt8(ascii: "/")) {
      if component.elementsEqual(".".utf8) { continue }
      if component.elementsEqual("..".utf8) {
        depth -= 1
        if depth < 0 { return false }
      } else {
        depth += 1
      }
    }
    return true
  }
}
