import CProtFSSys
import Foundation

/// Hands the signals this process gets to a function, on a thread of its own, from the moment
/// `forward` returns: a C handler writes each one's number into a pipe that the thread reads.
///
/// Dispatch signal sources install their handler later, on libdispatch's own thread; a signal
/// that arrives meanwhile, after the program has set it to be ignored so that it does not kill
/// the process first, is lost. A launch's supervisor that loses the SIGTERM a user sends it just
/// after the app starts would wait for the app forever.
public enum SignalForwarding {
  /// Forwards `signals` to `handler` (called on one thread, in order) for the rest of the
  /// process's life; one call per process.
  public static func forward(_ signals: [Int32], to handler: @escaping @Sendable (Int32) -> Void)
    throws(ProtFSError)
  {
    var ends: [Int32] = [0, 0]
    if case .failure(let e) = valueOrErrno(.pipe, { pipe(&ends) }) {
      throw ProtFSError(.io, "Cannot create the pipe that forwards signals: \(e).")
    }
    for end in ends { _ = valueOrErrno(.fcntl) { fcntl(end, F_SETFD, FD_CLOEXEC) } }
    // The handler's end never blocks: a signal more than the pipe holds is dropped, never a hang.
    _ = valueOrErrno(.fcntl) { fcntl(ends[1], F_SETFL, O_NONBLOCK) }
    let read = ends[0]
    if case .failure(let e) = valueOrErrno(
      .sigaction, { protfs_forward_signals(ends[1], signals, Int32(signals.count)) })
    {
      throw ProtFSError(.io, "Cannot install the handlers that forward signals: \(e).")
    }
    Thread {
      var byte: UInt8 = 0
      while true {
        switch valueOrErrno(.read, { Foundation.read(read, &byte, 1) }) {
        case .success(1): handler(Int32(byte))
        case .failure(let e) where e == Errno(EINTR): continue
        default: return
        }
      }
    }.start()
  }
}
