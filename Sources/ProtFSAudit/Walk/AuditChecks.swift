import Foundation
import ProtFS
import ProtFSSystem

/// The audit's checks of one entry, on the worker that met it.
extension Worker {
  /// Checks the entry whose path is in `path`; when it is a directory to walk into, returns its own
  /// class (`.some(nil)` when it has none), which its children inherit.
  package mutating func check(
    dirfd: Int32, name: UnsafePointer<CChar>, nameBytes name8: UnsafeBufferPointer<UInt8>, nameStart: Int,
    kind: FileKind, inheritance: ClassInheritance
  ) -> ProtectionClass?? {
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
    let resolved = inheritance.effective(own: own)
    let effective = resolved.protectionClass
    let source = resolved.source
    if !hasAttribute { reportNoOwnClass(effective, source) }

    checkModes(dirfd: dirfd, name: name, kind: kind, effective)

    if kind == .file { checkTemporaryDownload(nameBytes) }
    if kind == .file, let seal { checkSeal(dirfd: dirfd, name: name, effective, seal) }

    evaluatePolicies(
      dirfd: dirfd, name: name8, nameStart: nameStart, kind: kind, effective: effective, source: source,
      inheritance: inheritance)

    guard kind == .directory else { return nil }
    return .some(own)
  }

  /// Reports that the item has no class of its own and gets `effective` from `source` (the texts
  /// made once per class and source).
  private mutating func reportNoOwnClass(_ effective: ProtectionClass, _ source: ClassSource) {
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

  /// The checks of the item's saved mode and permission bits against its class `effective`.
  private mutating func checkModes(
    dirfd: Int32, name: UnsafePointer<CChar>, kind: FileKind, _ effective: ProtectionClass
  ) {
    var hasSavedMode = false
    let checkLockedOut =
      !(kind == .directory ? mayBeLockedOut.directories : mayBeLockedOut.files)[effective.strength]
    if checkLockedOut {
      // A second getxattrat: measured cheaper than one listxattrat plus a getxattrat for labelled items.
      hasSavedMode = self.hasSavedMode(dirfd: dirfd, name: name)
      if hasSavedMode {
        emit(
          .lockedOut,
          "The item still carries \(AttributeName.savedMode) from a lock although its class (\(effective.shortName)) is available in the device's state, so its permission bits were not restored.",
          expected: "no \(AttributeName.savedMode)", actual: "\(AttributeName.savedMode) present")
      }
    }

    var st = stat()
    let statted =
      kind == .file && (try? Kernel.fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW).get()) != nil
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
  }

  /// Reports a file named as a background download's temporary file that no download task owns.
  private mutating func checkTemporaryDownload(_ nameBytes: ArraySlice<UInt8>) {
    guard nameBytes.starts(with: Self.temporaryPrefix),
      nameBytes.reversed().starts(with: Self.temporarySuffix.reversed())
    else { return }
    let text = String(decoding: nameBytes, as: UTF8.self)
    if !owned.contains(text) {
      emit(
        .orphanTemporaryDownload, "The background-download temp file belongs to no download task.",
        expected: "a task that owns it", actual: "no task")
    }
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
    source: ClassSource, inheritance: ClassInheritance
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
          inheritance: inheritance, actual: "\(effective.shortName) (\(source.rawValue))")
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
    effective: ProtectionClass, inheritance: ClassInheritance, actual: String
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
    case .absent: siblingClass = inheritance.effectiveClass(own: nil)
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
    let opened = (path + [0]).withUnsafeBufferPointer { bytes in
      bytes.withMemoryRebound(to: CChar.self) { relative in
        Kernel.openat2(rootFD, relative.baseAddress!, Kernel.pathOnly | O_CLOEXEC, resolve: [.beneath, .noMagicLinks])
      }
    }
    let code: Int32
    switch opened {
    case .success(let fd):
      closeDescriptor(fd)
      return
    case .failure(let e): code = e.rawValue
    }
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
    case ENOSYS, ENAMETOOLONG, EAGAIN:
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
      raw.withMemoryRebound(to: CChar.self) { target in
        (try? Kernel.readlinkat(dirfd, name, target.baseAddress!, target.count).get()) ?? -1
      }
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
