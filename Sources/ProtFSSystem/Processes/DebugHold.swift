import Foundation

/// A pause for tests at a point where a race could hide: with the environment variable naming a
/// FIFO, a debug build waits there until the test that opened the FIFO closes it, so that the
/// test can act first (send a signal, have a program move). Release builds never wait.
package enum DebugHold {
  /// Waits at this point while the FIFO that `variable` names is held open for writing.
  package static func wait(_ variable: String) {
    #if DEBUG
      guard let fifo = ProcessEnvironment.value(variable) else { return }
      guard case .success(let fd) = valueOrErrno(.open, { open(fifo, O_RDONLY | O_CLOEXEC) }) else { return }
      var byte: UInt8 = 0
      while (try? valueOrErrno(.read) { read(fd, &byte, 1) }.get()) ?? 0 > 0 {}
      closeDescriptor(fd)
    #endif
  }
}
