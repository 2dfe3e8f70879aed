import Foundation
import ProtFSTestSupport
import Testing

/// Every libc call is named once, in the syscall layer (issues 30 and 65): outside `ProtFSSystem`
/// code calls `Kernel.<cname>(…)`, a handle method or `closeDescriptor(_:)`, never a listed C
/// function (not even inside a closure) nor `valueOrErrno` itself, which the wrappers run (it
/// retries EINTR, reads errno at once and lets debug builds inject faults). This test reads every
/// Swift file under `Sources/` but the layer itself and names each call left, one line per line.
@Suite("SyscallLayer")
struct SyscallLayerTests {
  /// The C functions only the syscall layer calls (/work/briefs/libc-names.txt): its wrappers give
  /// each the same name on `Kernel`.
  static let syscalls: Set<String> = [
    "open", "openat", "close", "read", "write", "pread", "pwrite", "stat", "lstat", "fstat", "fstatat", "statvfs",
    "fstatvfs", "unlink", "unlinkat", "rename", "renameat", "mkdir", "mkdirat", "rmdir", "chmod", "fchmod", "fchmodat",
    "chown", "fchown", "fchownat", "lchown", "truncate", "ftruncate", "fsync", "fdatasync", "lseek", "link", "linkat",
    "symlink", "symlinkat", "readlink", "readlinkat", "access", "faccessat", "futimens", "utimensat", "mknod",
    "mknodat", "mkfifo", "mkfifoat", "getxattr", "lgetxattr", "fgetxattr", "setxattr", "lsetxattr", "fsetxattr",
    "listxattr", "llistxattr", "flistxattr", "removexattr", "lremovexattr", "fremovexattr", "flock", "sendfile",
    "kill", "waitpid", "pipe", "pipe2", "dup", "dup2", "dup3", "fcntl", "ioctl", "mount", "umount", "umount2",
    "socket", "connect", "bind", "listen", "accept", "accept4", "shutdown", "getsockopt", "setsockopt", "sendmsg",
    "recvmsg", "poll", "inotify_init1", "inotify_add_watch", "chdir", "fchdir", "setsid", "geteuid", "getuid",
    "getegid",
    "getgid", "getpid", "getppid", "setuid", "setgid", "seteuid", "setegid", "setresuid", "setresgid", "setgroups",
    "umask", "usleep", "nanosleep", "isatty", "tcgetattr", "tcsetattr", "posix_spawn", "posix_spawnp", "execve",
    "execv", "execvp", "fork", "vfork", "_exit", "prctl", "signal", "sigaction", "sigprocmask", "pthread_sigmask",
    "realpath", "opendir", "fdopendir", "readdir", "closedir", "mlock", "munlock", "getrlimit", "setrlimit", "setenv",
    "unsetenv", "mmap", "munmap",
  ]

  /// The listed names that are also C structs: `stat()` with no argument makes one.
  static let structNames: Set<String> = ["stat", "statvfs", "flock", "sigaction"]

  /// The syscall layer's runner of a C call, which only the layer's wrappers call.
  static let runner = "valueOrErrno"

  /// The `Kernel` calls that return what their C call returns (-1 and errno), for the layer's own
  /// use (Kernel+Calls.swift); the layers above call their `Result` forms (Kernel+LibcShims.swift).
  static let kernelCalls: Set<String> = [
    "openAt", "openAt2", "openUnnamed", "linkUnnamed", "renameNoReplace", "rename", "copyFileRange", "cloneFile",
    "syncFilesystem", "startWriteback", "reserveSpace", "copyAttributes", "addUserKey", "searchUserKey", "readKey",
    "invalidateKey",
  ]

  /// A raw call allowed for now: the file (below `Sources/`), text its line holds, and why.
  struct Exemption: CustomStringConvertible {
    /// The file, relative to `Sources/`.
    var file: String
    /// Text the exempted line holds (the call as written).
    var line: String
    /// Why the call stays raw.
    var reason: String
    /// The exemption as a test report names it.
    var description: String { "\(file): \(line)" }
  }

  /// The raw calls left, each with its reason. Keep it small: route a call rather than add it here.
  static let exemptions: [Exemption] = []

  /// A raw call found: where, and which.
  struct RawCall: Equatable, CustomStringConvertible {
    /// The file, relative to `Sources/`.
    var file: String
    /// The line, from 1.
    var line: Int
    /// The function called.
    var name: String
    /// The line as written.
    var text: String
    /// The call as a test report names it.
    var description: String { "\(file):\(line): \(name)(…) outside the syscall layer: \(text)" }
  }

  @Test func noSourceOutsideTheSyscallLayerMakesARawSystemCall() throws {
    let found = try Self.rawCalls(under: RepositoryLayout.packageRoot + "/Sources")
    let unexempted = found.filter { call in
      !Self.exemptions.contains { $0.file == call.file && call.text.contains($0.line) }
    }
    // One line per line of source, however many calls it holds.
    let lines = Dictionary(grouping: unexempted) { "\($0.file):\($0.line)" }
    for key in lines.keys.sorted(by: { $0.localizedStandardCompare($1) == .orderedAscending }) {
      let calls = lines[key]!
      Issue.record("\(key): \(calls.map { "\($0.name)(…)" }.joined(separator: ", ")): \(calls[0].text)")
    }
    // An exemption that matches nothing is stale: the call was routed, so the entry goes.
    for exemption in Self.exemptions
    where !found.contains(where: { $0.file == exemption.file && $0.text.contains(exemption.line) }) {
      Issue.record("stale exemption, no raw call matches it: \(exemption)")
    }
  }

  @Test func theScannerFindsRawCallsAndOnlyThose() {
    let source = """
      import Foundation
      // close(fd) in a comment, and /* write(fd, b, 1) */ in a block
      func f(_ fd: Int32, handle: H) {
        let s = "read(fd, &b, 1) in a string, uid \\(geteuid()) in \\("close(fd)")"
        handle.read(upToCount: 4)
        handle.close()
        _ = valueOrErrno(.fsync) { fsync(fd) }
        _ = Kernel.fsync(fd)
        reader(fd)
        var st = stat()
        _ = Kernel.write(fd, &st, 1)
        let me = geteuid()
        unlinkat(fd, "x", 0)
        _ = Glibc.close(fd)
        _ = Kernel.openAt2(fd, "p", 0, resolve: [])
        _ = Kernel.openat2(fd, "p", 0, resolve: [])
        write(body, to: file)
      }
      """
    let found = Self.rawCalls(in: source, file: "Planted.swift")
    #expect(found.map(\.name) == ["geteuid", "valueOrErrno", "fsync", "geteuid", "unlinkat", "close", "openAt2"])
    #expect(found.map(\.line) == [4, 7, 7, 12, 13, 14, 15])
  }

  @Test func aCallOfAFunctionTheFileDeclaresIsNotASystemCall() {
    let source = """
      struct Store {
        func read(_ name: String) -> Int { 0 }
        func use(_ open: (Int32, String) -> Int32) { _ = read("x"); _ = open(1, "y") }
      }
      """
    #expect(Self.rawCalls(in: source, file: "Store.swift").isEmpty)
  }

  // MARK: The scanner

  /// The raw calls in every Swift file under `root` but `ProtFSSystem` (and the C targets, which
  /// hold no Swift).
  static func rawCalls(under root: String) throws -> [RawCall] {
    guard let files = FileManager.default.enumerator(atPath: root) else { return [] }
    var found: [RawCall] = []
    for case let file as String in files where file.hasSuffix(".swift") && !file.hasPrefix("ProtFSSystem/") {
      found += rawCalls(in: try String(contentsOfFile: root + "/" + file, encoding: .utf8), file: file)
    }
    return found.sorted { ($0.file, $0.line) < ($1.file, $1.line) }
  }

  /// The raw calls in `source`: `valueOrErrno`, a listed function called free (an identifier not
  /// preceded by `.` or a letter, or qualified by its C module) or a listed raw `Kernel` call, with
  /// no argument label (imported C functions take none), not a struct made with no argument
  /// (`stat()`), and not a function or closure parameter the file declares itself.
  static func rawCalls(in source: String, file: String) -> [RawCall] {
    let code = Array(blankingCommentsAndStrings(source).utf8)
    let lines = source.split(separator: "\n", omittingEmptySubsequences: false)
    let declared = declaredNames(code)
    var found: [RawCall] = []
    var i = 0
    var line = 1
    while i < code.count {
      if code[i] == UInt8(ascii: "\n") { line += 1 }
      guard isIdentifierByte(code[i]), i == 0 || !isIdentifierByte(code[i - 1]) else {
        i += 1
        continue
      }
      var end = i
      while end < code.count && isIdentifierByte(code[end]) { end += 1 }
      let name = String(decoding: code[i..<end], as: UTF8.self)
      defer { i = end }
      guard end < code.count, code[end] == UInt8(ascii: "(") else { continue }
      let qualifier = self.qualifier(code, before: i)
      let isKernel = qualifier == "Kernel" && kernelCalls.contains(name)
      let isRunner = name == runner && (qualifier == nil || qualifier == "ProtFSSystem")
      let isFree = syscalls.contains(name) && (qualifier == nil || ["Glibc", "Foundation"].contains(qualifier!))
      guard isKernel || isRunner || isFree else { continue }
      let arguments = topLevelArguments(code, from: end)
      // `stat()`: the struct; a labelled argument: a Swift function of the same name.
      if isFree && arguments.isEmpty && structNames.contains(name) { continue }
      if isFree && (qualifier == nil && declared.contains(name) || arguments.contains(where: isLabelled)) { continue }
      found.append(
        RawCall(file: file, line: line, name: name, text: String(lines[line - 1]).trimmingCharacters(in: .whitespaces)))
    }
    return found
  }

  /// `source` with every comment and string literal (interpolations included) turned into spaces,
  /// line breaks kept, so that offsets and line numbers stay those of the file.
  static func blankingCommentsAndStrings(_ source: String) -> String {
    let bytes = Array(source.utf8)
    var out = bytes
    func blank(_ range: Range<Int>) {
      for k in range where out[k] != UInt8(ascii: "\n") { out[k] = UInt8(ascii: " ") }
    }
    func starts(_ text: String, at k: Int) -> Bool {
      let t = Array(text.utf8)
      return k + t.count <= bytes.count && Array(bytes[k..<(k + t.count)]) == t
    }
    var i = 0
    while i < bytes.count {
      if starts("//", at: i) {
        var j = i
        while j < bytes.count && bytes[j] != UInt8(ascii: "\n") { j += 1 }
        blank(i..<j)
        i = j
      } else if starts("/*", at: i) {
        // Swift's block comments nest.
        var depth = 0
        var j = i
        repeat {
          if starts("/*", at: j) {
            depth += 1
            j += 2
          } else if starts("*/", at: j) {
            depth -= 1
            j += 2
          } else {
            j += 1
          }
        } while depth > 0 && j < bytes.count
        blank(i..<j)
        i = j
      } else if bytes[i] == UInt8(ascii: "\"") || (bytes[i] == UInt8(ascii: "#") && starts("#\"", at: i)) {
        var hashes = 0
        var j = i
        while bytes[j] == UInt8(ascii: "#") {
          hashes += 1
          j += 1
        }
        let delimiter = starts("\"\"\"", at: j) ? "\"\"\"" : "\""
        let close = delimiter + String(repeating: "#", count: hashes)
        j += delimiter.utf8.count
        let interpolation = "\\" + String(repeating: "#", count: hashes) + "("
        var interpolations: [Range<Int>] = []
        while j < bytes.count && !starts(close, at: j) {
          if starts(interpolation, at: j) {
            // An interpolation is code: kept, its own strings blanked.
            let start = j + interpolation.utf8.count
            let end = endOfInterpolation(bytes, from: start)
            interpolations.append(start..<end)
            j = end + 1
          } else {
            // An escape (only without hashes) never ends the literal.
            j += hashes == 0 && bytes[j] == UInt8(ascii: "\\") ? 2 : 1
          }
        }
        j = min(bytes.count, j + close.utf8.count)
        blank(i..<j)
        for range in interpolations where range.upperBound <= bytes.count {
          let code = blankingCommentsAndStrings(String(decoding: bytes[range], as: UTF8.self))
          out.replaceSubrange(range, with: Array(code.utf8))
        }
        i = j
      } else {
        i += 1
      }
    }
    return String(decoding: out, as: UTF8.self)
  }

  /// The index of the `)` that closes an interpolation whose code starts at `start`, over the
  /// parentheses and string literals in it.
  static func endOfInterpolation(_ bytes: [UInt8], from start: Int) -> Int {
    var depth = 1
    var k = start
    var inString = false
    while k < bytes.count {
      let byte = bytes[k]
      if inString {
        if byte == UInt8(ascii: "\\") {
          k += 1
        } else if byte == UInt8(ascii: "\"") {
          inString = false
        }
      } else if byte == UInt8(ascii: "\"") {
        inString = true
      } else if byte == UInt8(ascii: "(") {
        depth += 1
      } else if byte == UInt8(ascii: ")") {
        depth -= 1
        if depth == 0 { return k }
      }
      k += 1
    }
    return bytes.count
  }

  /// The names the file declares as functions (`func read(`) or as parameters of function type
  /// (`_ open: (`), whose unqualified calls are the file's own (Swift finds them before the C
  /// function of the same name).
  static func declaredNames(_ code: [UInt8]) -> Set<String> {
    let text = String(decoding: code, as: UTF8.self)
    var names: Set<String> = []
    let patterns = [#"\bfunc\s+(\w+)"#, #"(\w+)\s*:\s*(?:@\w+\s+)*\("#]
    for pattern in patterns {
      guard let regex = try? NSRegularExpression(pattern: pattern) else { continue }
      for match in regex.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
        if let range = Range(match.range(at: 1), in: text) { names.insert(String(text[range])) }
      }
    }
    return names
  }

  /// The module or type an identifier at `start` is qualified by (`Glibc.` in `Glibc.read(`);
  /// `""` after any other `.` (a method), nil when it stands free.
  static func qualifier(_ code: [UInt8], before start: Int) -> String? {
    guard start > 0, code[start - 1] == UInt8(ascii: ".") else { return nil }
    var begin = start - 1
    while begin > 0 && isIdentifierByte(code[begin - 1]) { begin -= 1 }
    return String(decoding: code[begin..<(start - 1)], as: UTF8.self)
  }

  /// The top-level arguments of the call whose `(` is at `open`, as written.
  static func topLevelArguments(_ code: [UInt8], from open: Int) -> [String] {
    var depth = 0
    var current: [UInt8] = []
    var arguments: [String] = []
    var k = open
    while k < code.count {
      let byte = code[k]
      if byte == UInt8(ascii: "(") || byte == UInt8(ascii: "[") || byte == UInt8(ascii: "{") { depth += 1 }
      if byte == UInt8(ascii: ")") || byte == UInt8(ascii: "]") || byte == UInt8(ascii: "}") {
        depth -= 1
        if depth == 0 { break }
      }
      if depth == 1 && byte == UInt8(ascii: ",") {
        arguments.append(String(decoding: current, as: UTF8.self))
        current = []
      } else if k > open {
        current.append(byte)
      }
      k += 1
    }
    let last = String(decoding: current, as: UTF8.self)
    if !arguments.isEmpty || !last.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty { arguments.append(last) }
    return arguments
  }

  /// Whether an argument starts with a label (`to: file`), which no imported C function takes.
  static func isLabelled(_ argument: String) -> Bool {
    argument.trimmingCharacters(in: .whitespacesAndNewlines).range(of: #"^\w+\s*:(?!:)"#, options: .regularExpression)
      != nil
  }

  /// Letters, digits and `_`.
  static func isIdentifierByte(_ byte: UInt8) -> Bool {
    (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
      || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "_")
  }
}
