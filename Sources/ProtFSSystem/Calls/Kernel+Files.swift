import Foundation

extension Kernel {
  /// The bytes of the kernel's file at `path` (`/proc`, `/sys`, cgroup files), read to its end
  /// with `open` and `read`: such a file reports no size, so it is never trusted to have one. Nil
  /// when it cannot be opened or read, or holds more than `limit` bytes.
  ///
  /// FileManager and FileHandle read these too, but their first use in a process costs more than
  /// the read: a launch reads a dozen of them before its app runs.
  package static func readKernelFile(_ path: String, limit: Int = 1 << 20) -> [UInt8]? {
    guard case .success(let fd) = open(path, O_RDONLY | O_CLOEXEC) else { return nil }
    defer { _ = closeDescriptor(fd) }
    // A page a read: what such a file gives at most per call.
    return try? readToEnd(fd, limit: limit, chunk: 4096).get()
  }

  /// The bytes of `fd` from its position to its end, read `chunk` bytes at a time; nil as soon as
  /// more than `limit` came.
  package static func readToEnd(_ fd: Int32, limit: Int, chunk size: Int = 64 << 10) -> Result<[UInt8]?, Errno> {
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: size)
    while true {
      let result = chunk.withUnsafeMutableBytes { buffer in
        read(fd, buffer.baseAddress, buffer.count)
      }
      guard case .success(let count) = result else { return result.map { _ in nil } }
      if count == 0 { return .success(bytes) }
      guard bytes.count + count <= limit else { return .success(nil) }
      bytes += chunk[..<count]
    }
  }
}

/// Why a file a user named (an Info.plist, a payload, a list) could not be read whole.
package enum NamedFileFailure: Error, Sendable, Equatable {
  /// It could not be opened or read.
  case unreadable(Errno)
  /// It holds more than `limit` bytes.
  case tooLarge(limit: Int)
  /// A FIFO, pipe or device that gave nothing more, and no end, within `seconds`.
  case silent(seconds: Int)
  /// A FIFO, pipe or device that did not end within `seconds` in all (it gave a byte now and then).
  case unending(seconds: Int)

  /// The reason, for a message that says "Cannot read '…': REASON.".
  package var reason: String {
    switch self {
    case .unreadable(let error): return error.description
    case .tooLarge(let limit): return "it holds more than \(limit) bytes"
    case .silent(let seconds):
      return "nothing came through it within \(seconds) s (a FIFO or pipe that no program writes to, or ends)"
    case .unending(let seconds):
      return "it did not end within \(seconds) s (a FIFO or pipe that keeps giving a little and never ends)"
    }
  }
}

extension Kernel {
  /// How long a FIFO, pipe or device a user named may keep a command waiting for its next bytes.
  package static let namedFileSilence = 10
  /// How long reading a FIFO, pipe or device a user named may take in all: one that gives a byte
  /// every few seconds must not keep a command (root's, reading what another user wrote) for days.
  package static let namedFileTotal = 60

  /// The bytes of the file a user named at `path`, at most `limit`. A regular file is read to its
  /// end; a FIFO, a pipe (`<(...)`) or a device is opened without waiting for a writer and read
  /// until it ends (a FIFO once a writer came and went), as long as each wait, for a writer or
  /// for more bytes, lasts less than `namedFileSilence` seconds: a FIFO that no program ever
  /// writes to is an error, not a command that never returns; nor is one that trickles (the
  /// whole read lasts at most `total` seconds, `namedFileTotal` unless given).
  package static func readNamedFile(_ path: String, limit: Int, within total: Int = namedFileTotal)
    -> Result<[UInt8], NamedFileFailure>
  {
    let fd: Int32
    switch open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY) {
    case .success(let opened): fd = opened
    case .failure(let error): return .failure(.unreadable(error))
    }
    defer { _ = closeDescriptor(fd) }
    var status = SwiftGlibc.stat()
    if case .failure(let error) = fstat(fd, &status) { return .failure(.unreadable(error)) }
    // A FIFO no writer has opened yet reads as ended: it is waited for, once, as a blocking open
    // would wait.
    var awaitingWriter = status.st_mode & S_IFMT == S_IFIFO
    let deadline = Date().addingTimeInterval(Double(total))
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 64 << 10)
    while true {
      let result = chunk.withUnsafeMutableBytes { buffer in
        read(fd, buffer.baseAddress, buffer.count)
      }
      switch result {
      case .success(0) where !awaitingWriter:
        return .success(bytes)
      case .success(let count) where count > 0:
        guard bytes.count + count <= limit else { return .failure(.tooLarge(limit: limit)) }
        bytes += chunk[..<count]
        awaitingWriter = false
        continue
      case .success, .failure(Errno(EAGAIN)):
        // Nothing yet: wait for a writer, bytes, or the writer's leaving (POLLHUP), then read again.
        awaitingWriter = false
        let left = deadline.timeIntervalSinceNow
        guard left > 0 else { return .failure(.unending(seconds: total)) }
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let wait = min(Double(namedFileSilence), left)
        switch poll(&entry, 1, Int32(wait * 1000)) {
        case .success(0) where wait < Double(namedFileSilence): return .failure(.unending(seconds: total))
        case .success(0): return .failure(.silent(seconds: namedFileSilence))
        case .success: continue
        case .failure(let error): return .failure(.unreadable(error))
        }
      case .failure(let error):
        return .failure(.unreadable(error))
      }
    }
  }
}
