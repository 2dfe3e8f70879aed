import CProtFSSys
import Foundation
import Synchronization

/// A pseudo-terminal of its own for a program protfs starts for untrusted code, relayed to and
/// from the caller's terminal by protfs, as `sudo` (`use_pty`), `su --pty` and `machinectl shell`
/// do.
///
/// The program leads a session of its own whose controlling terminal is the pseudo-terminal's
/// slave. It never holds a descriptor of the caller's terminal: it cannot type into the caller's
/// shell (`TIOCSTI`), change the caller's terminal settings or read what the caller types after it
/// ended; a process it leaves behind keeps only a hung-up pseudo-terminal. While the relay runs,
/// the caller's terminal is in raw mode (the pseudo-terminal's line discipline does the editing and
/// signals), and its window size follows the caller's (`resize()`, on `SIGWINCH`).
public final class TerminalRelay: Sendable {
  /// The standard streams (0, 1, 2) that are the caller's terminal: the program gets the slave
  /// in their place; the others it inherits as they are (a pipe, a file).
  public let streams: [Int32]
  private let master: FileDescriptor
  private let slave: FileDescriptor
  private let stop: (read: FileDescriptor, write: FileDescriptor)
  /// The caller's terminal (its standard input when that is one, else the first stream that is).
  private let callerTerminal: Int32
  private let saved: Mutex<termios?>
  private let ended = DispatchSemaphore(value: 0)
  private let running = Atomic<Bool>(false)

  /// Whether any of this process's standard streams is a terminal.
  public static var standardStreamsIncludeTerminal: Bool {
    [STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO].contains { isatty($0) == 1 }
  }

  /// A relay for this process's standard streams, or nil when none of them is a terminal (the
  /// program then inherits them: pipes and files give it nothing of the caller's terminal). The
  /// slave is given to `owner` (the user the program runs as), as `login` gives a user their
  /// terminal, so that the program can open it again by name.
  public static func forStandardStreams(owner: uid_t?) throws(ProtFSError) -> TerminalRelay? {
    let streams = [STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO].filter { isatty($0) == 1 }
    guard let first = streams.first else { return nil }
    return try TerminalRelay(streams: streams, callerTerminal: first, owner: owner)
  }

  private init(streams: [Int32], callerTerminal: Int32, owner: uid_t?) throws(ProtFSError) {
    var master: Int32 = -1
    var slave: Int32 = -1
    let opened = valueOrErrno(.terminal) { protfs_open_pty(&master, &slave, owner ?? uid_t.max) }
    if case .failure(let error) = opened {
      throw ProtFSError(
        .io, "Cannot open a pseudo-terminal for the program: \(error).", errno: error.rawValue,
        remedy: .advice("run it with its standard streams redirected from and to files or pipes"))
    }
    self.master = FileDescriptor(owning: master)
    self.slave = FileDescriptor(owning: slave)
    self.streams = streams
    self.callerTerminal = callerTerminal
    switch FileDescriptor.pipe() {
    case .success(let ends): stop = ends
    case .failure(let error):
      throw ProtFSError(.io, "Cannot create the pipe that ends the terminal relay: \(error).", errno: error.rawValue)
    }
    // The program starts with the caller's settings (echo, line editing, the signal keys) and size.
    var settings = termios()
    if tcgetattr(callerTerminal, &settings) == 0 {
      _ = tcsetattr(slave, TCSANOW, &settings)
      saved = Mutex(settings)
    } else {
      saved = Mutex(nil)
    }
    resize()
  }

  /// The slave's descriptor, for the spawn (`ConfinedLaunch.terminal`).
  public var slaveDescriptor: Int32 { slave.rawValue }

  /// Gives the pseudo-terminal the caller's window size (the program gets `SIGWINCH`).
  public func resize() {
    var size = winsize()
    guard ioctl(callerTerminal, UInt(TIOCGWINSZ), &size) == 0 else { return }
    _ = ioctl(master.rawValue, UInt(TIOCSWINSZ), &size)
  }

  /// Starts relaying once the program runs: the slave is closed here (the program holds it now),
  /// the caller's terminal goes raw, and a thread copies between the two until `finish()` or the
  /// program's side hangs up. With `suspending` (`leader` the program's pid), the caller's suspend
  /// key (Ctrl-Z) typed while the program itself is in the foreground of its terminal calls
  /// `onSuspend` instead of reaching the program, whose process group the kernel would not stop
  /// (it has no parent in its session).
  public func start(leader: pid_t, suspending: Bool, onSuspend: @escaping @Sendable () -> Void = {}) {
    slave.close()
    // Only a caller in the foreground of its terminal reads it (a background job that did would be
    // stopped by SIGTTIN) and changes its settings; without the caller's input to pass on, its
    // terminal keeps its own settings and its keys signal protfs, which passes them on.
    let input = streams.contains(STDIN_FILENO) && isForeground ? STDIN_FILENO : -1
    if input >= 0 { makeCallerRaw() }
    running.store(true, ordering: .releasing)
    let output =
      streams.contains(STDOUT_FILENO) ? STDOUT_FILENO : (streams.contains(STDERR_FILENO) ? STDERR_FILENO : -1)
    let suspendKey: Int32 = suspending ? saved.withLock { $0.map { suspendCharacter(of: $0) } ?? -1 } : -1
    Thread { [self] in
      // 2: the suspend key; anything else ends the relay (stopped, hung up, or a failed call, after
      // which the program's output has nowhere to go but its own terminal).
      while protfs_relay_terminal(input, output, master.rawValue, stop.read.rawValue, suspendKey, leader) == 2 {
        onSuspend()
      }
      ended.signal()
    }.start()
  }

  /// Ends the relay (once the program has ended): what the program wrote is passed on first, then
  /// the caller's terminal gets its settings back and the pseudo-terminal is closed (a process
  /// the program left behind finds it hung up).
  public func finish() {
    guard running.exchange(false, ordering: .acquiringAndReleasing) else {
      restoreCaller()
      return
    }
    var byte: UInt8 = 1
    _ = valueOrErrno(.write) { write(stop.write.rawValue, &byte, 1) }
    ended.wait()
    restoreCaller()
    master.close()
    stop.read.close()
    stop.write.close()
  }

  /// Gives the caller's terminal its own settings back (before protfs stops itself, or ends).
  public func restoreCaller() {
    guard isForeground else { return }
    saved.withLock { saved in
      guard var settings = saved else { return }
      _ = tcsetattr(callerTerminal, TCSADRAIN, &settings)
    }
  }

  /// Whether protfs is in the foreground of the caller's terminal.
  private var isForeground: Bool { tcgetpgrp(callerTerminal) == getpgrp() }

  /// Raw mode on the caller's terminal again (after protfs was continued in the foreground), and
  /// its size again.
  public func makeCallerRaw() {
    guard isForeground else { return }
    saved.withLock { saved in
      guard var raw = saved else { return }
      cfmakeraw(&raw)
      _ = tcsetattr(callerTerminal, TCSADRAIN, &raw)
    }
    resize()
  }

  private func suspendCharacter(of settings: termios) -> Int32 {
    guard settings.c_lflag & tcflag_t(ISIG) != 0 else { return -1 }
    let key = withUnsafeBytes(of: settings.c_cc) { $0[Int(VSUSP)] }
    // _POSIX_VDISABLE: no suspend key.
    return key == 0 ? -1 : Int32(key)
  }
}
