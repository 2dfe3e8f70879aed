import Foundation
import ProtFS
import ProtFSSystem

/// Keeps passcodes given on the command line or in the environment away from other processes.
///
/// `/proc/PID/cmdline` is readable by every user, and `/proc/PID/environ` by the same user; both
/// show the process's own memory, so protfs overwrites the secret bytes in place once it has
/// copied them, and takes the variables out of the environment its children inherit.
package enum Secrets {
  /// Options whose value is a passcode.
  package static let options = ["--passcode", "--current"]
  /// Environment variables that hold a passcode.
  package static let environmentKeys = ["PROTFS_PASSCODE", "PROTFS_CURRENT_PASSCODE"]

  /// Blanks passcode option values in the process's own argument bytes (what `/proc/self/cmdline`
  /// shows). Call it first, after `CommandLine.arguments` was copied. Words after `--` belong to
  /// the program `exec` runs and are left alone.
  package static func hideArguments() {
    let argv = CommandLine.unsafeArgv
    // Read once: the getter counts the arguments on every call, which made this loop quadratic
    // (milliseconds for the 2,000 task ids `tasks wait` can be given).
    let count = Int(CommandLine.argc)
    var index = 1
    while index < count, let word = argv[index] {
      let text = String(cString: word)
      if text == "--" { break }
      if options.contains(text), index + 1 < count, let value = argv[index + 1] {
        blank(value, from: 0)
        index += 2
        continue
      }
      if let option = options.first(where: { text.hasPrefix($0 + "=") }) {
        blank(word, from: option.utf8.count + 1)
      }
      index += 1
    }
  }

  /// Blanks the values of the passcode variables in the environment block (what
  /// `/proc/self/environ` shows) and removes them from the environment children inherit. Call it
  /// after the environment was copied.
  package static func hideEnvironment() {
    var entry = environ
    while let variable = entry.pointee {
      let text = String(cString: variable)
      if let key = environmentKeys.first(where: { text.hasPrefix($0 + "=") }) {
        blank(variable, from: key.utf8.count + 1)
      }
      entry += 1
    }
    for key in environmentKeys { Kernel.unsetenv(key) }
  }

  /// Overwrites a C string from byte `start` to its end with NULs, keeping its length.
  private static func blank(_ string: UnsafeMutablePointer<CChar>, from start: Int) {
    let length = strlen(string)
    guard length > start else { return }
    (string + start).update(repeating: 0, count: length - start)
  }
}

/// Reading a passcode (or a backup's password) from a file or standard input (`--passcode-file`,
/// `--current-file`, `--password-file`).
package enum PasscodeFile {
  /// More than this is not a passcode file.
  package static let maximumSize = 4096

  /// The first line of `path` (`-`: one line of standard input), without its line ending; `what`
  /// names the secret in messages.
  package static func read(_ path: String, option: String, what: String = "passcode") throws -> String {
    let bytes = path == "-" ? readLineOfStandardInput() : try readFile(path, what: what)
    var line = bytes.split(separator: 0x0A, maxSplits: 1, omittingEmptySubsequences: false).first ?? []
    if line.last == 0x0D { line = line.dropLast() }
    guard !line.isEmpty else {
      let source = path == "-" ? "Standard input" : "The \(what) file '\(path)'"
      throw ProtFSError(
        .invalidArgument, "\(source) (--\(option)) holds no \(what).",
        remedy: .advice("put the \(what) on its first line"))
    }
    guard let passcode = String(validating: line, as: UTF8.self) else {
      throw ProtFSError(.invalidArgument, "The \(what) given with --\(option) is not UTF-8 text.")
    }
    return passcode
  }

  /// Reads standard input byte by byte up to the first newline, so that a program `exec` runs
  /// later still gets the rest.
  private static func readLineOfStandardInput() -> [UInt8] {
    var line: [UInt8] = []
    var byte: UInt8 = 0
    while line.count <= maximumSize {
      let count = (try? Kernel.read(STDIN_FILENO, &byte, 1).get()) ?? -1
      guard count == 1, byte != 0x0A else { break }
      line.append(byte)
    }
    return line
  }

  private static func readFile(_ path: String, what: String) throws -> [UInt8] {
    let fd = try Kernel.open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY).orThrow(
      "read the \(what) file", path: path)
    defer { closeDescriptor(fd) }
    var bytes = [UInt8](repeating: 0, count: maximumSize + 1)
    var filled = 0
    while filled < bytes.count {
      let count = try bytes.withUnsafeMutableBytes { raw throws(ProtFSError) in
        try Kernel.read(fd, raw.baseAddress! + filled, raw.count - filled).orThrow(
          "read the \(what) file", path: path)
      }
      if count == 0 { break }
      filled += count
    }
    guard filled <= maximumSize || bytes.prefix(filled).contains(0x0A) else {
      throw ProtFSError(
        .invalidArgument, "The \(what) file '\(path)' is longer than \(maximumSize) bytes without a line break.",
        path: path, remedy: .advice("put the \(what) alone on the file's first line"))
    }
    return Array(bytes.prefix(filled))
  }
}
