import Foundation

/// The libc calls on processes, signals, terminals and memory, as the layers above make them: the system
/// calls that fail with errno return a `Result` through `valueOrErrno`; the queries that cannot fail, and the
/// calls protfs reads the C value of (`isatty`, `setenv`, `posix_spawn`), return it as it is.
extension Kernel {
  /// `kill(2)`. As `.kill`.
  package static func kill(_ pid: pid_t, _ sig: Int32) -> Result<Int32, Errno> {
    valueOrErrno(.kill) { Glibc.kill(pid, sig) }
  }

  /// `setsid(2)`: the new session's id. As `.setsid`.
  package static func setsid() -> Result<pid_t, Errno> {
    valueOrErrno(.setsid) { Glibc.setsid() }
  }

  /// `poll(2)`: how many of `fds` are ready. As `.poll`.
  package static func poll(
    _ fds: UnsafeMutablePointer<pollfd>, _ nfds: nfds_t, _ timeout: Int32
  ) -> Result<Int32, Errno> {
    valueOrErrno(.poll) { Glibc.poll(fds, nfds, timeout) }
  }

  /// `inotify_init1(2)`. As `.inotifyInit`.
  package static func inotify_init1(_ flags: Int32) -> Result<Int32, Errno> {
    valueOrErrno(.inotifyInit) { Glibc.inotify_init1(flags) }
  }

  /// `inotify_add_watch(2)`. As `.inotifyAddWatch`.
  package static func inotify_add_watch(
    _ fd: Int32, _ name: UnsafePointer<CChar>, _ mask: UInt32
  ) -> Result<Int32, Errno> {
    valueOrErrno(.inotifyAddWatch) { Glibc.inotify_add_watch(fd, name, mask) }
  }

  /// `getpid(2)`.
  @discardableResult
  package static func getpid() -> pid_t {
    Glibc.getpid()
  }

  /// `getppid(2)`.
  @discardableResult
  package static func getppid() -> pid_t {
    Glibc.getppid()
  }

  /// `getuid(2)`.
  @discardableResult
  package static func getuid() -> uid_t {
    Glibc.getuid()
  }

  /// `geteuid(2)`.
  @discardableResult
  package static func geteuid() -> uid_t {
    Glibc.geteuid()
  }

  /// `getgid(2)`.
  @discardableResult
  package static func getgid() -> gid_t {
    Glibc.getgid()
  }

  /// `getegid(2)`.
  @discardableResult
  package static func getegid() -> gid_t {
    Glibc.getegid()
  }

  /// `usleep(3)`: `0`, or `-1` when a signal ended the sleep early.
  @discardableResult
  package static func usleep(_ useconds: useconds_t) -> Int32 {
    Glibc.usleep(useconds)
  }

  /// `_exit(2)`: ends the process at once, running no `atexit` handler and flushing no stream.
  package static func _exit(_ status: Int32) -> Never { Glibc._exit(status) }

  /// `signal(2)`: the previous disposition, or `SIG_ERR`.
  @discardableResult
  package static func signal(_ sig: Int32, _ handler: __sighandler_t?) -> __sighandler_t? {
    Glibc.signal(sig, handler)
  }

  /// `pthread_sigmask(3)`: `0` or the error number.
  @discardableResult
  package static func pthread_sigmask(
    _ how: Int32, _ set: UnsafePointer<sigset_t>?, _ oset: UnsafeMutablePointer<sigset_t>?
  ) -> Int32 {
    Glibc.pthread_sigmask(how, set, oset)
  }

  /// `posix_spawn(3)`: `0` or the error number.
  @discardableResult
  package static func posix_spawn(
    _ pid: UnsafeMutablePointer<pid_t>?, _ path: UnsafePointer<CChar>,
    _ fileActions: UnsafePointer<posix_spawn_file_actions_t>?, _ attributes: UnsafePointer<posix_spawnattr_t>?,
    _ argv: UnsafePointer<UnsafeMutablePointer<CChar>?>, _ envp: UnsafePointer<UnsafeMutablePointer<CChar>?>?
  ) -> Int32 {
    Glibc.posix_spawn(pid, path, fileActions, attributes, argv, envp)
  }

  /// `getrlimit(2)`: `0`, or `-1` and `errno`.
  @discardableResult
  package static func getrlimit(_ resource: __rlimit_resource_t, _ rlimits: UnsafeMutablePointer<rlimit>) -> Int32 {
    Glibc.getrlimit(resource, rlimits)
  }

  /// `setrlimit(2)`: `0`, or `-1` and `errno`.
  @discardableResult
  package static func setrlimit(_ resource: __rlimit_resource_t, _ rlimits: UnsafePointer<rlimit>) -> Int32 {
    Glibc.setrlimit(resource, rlimits)
  }

  /// `setenv(3)`: `0`, or `-1` and `errno`.
  @discardableResult
  package static func setenv(_ name: UnsafePointer<CChar>, _ value: UnsafePointer<CChar>, _ replace: Int32) -> Int32 {
    Glibc.setenv(name, value, replace)
  }

  /// `unsetenv(3)`: `0`, or `-1` and `errno`.
  @discardableResult
  package static func unsetenv(_ name: UnsafePointer<CChar>) -> Int32 {
    Glibc.unsetenv(name)
  }

  /// `isatty(3)`: `1` when `fd` is a terminal.
  @discardableResult
  package static func isatty(_ fd: Int32) -> Int32 {
    Glibc.isatty(fd)
  }

  /// `tcgetattr(3)`: `0`, or `-1` and `errno`.
  @discardableResult
  package static func tcgetattr(_ fd: Int32, _ termios: UnsafeMutablePointer<termios>) -> Int32 {
    Glibc.tcgetattr(fd, termios)
  }

  /// `tcsetattr(3)`: `0`, or `-1` and `errno`.
  @discardableResult
  package static func tcsetattr(_ fd: Int32, _ optionalActions: Int32, _ termios: UnsafePointer<termios>) -> Int32 {
    Glibc.tcsetattr(fd, optionalActions, termios)
  }

  /// `mlock(2)`: `0`, or `-1` and `errno` (a limit of locked memory).
  @discardableResult
  package static func mlock(_ addr: UnsafeRawPointer?, _ len: Int) -> Int32 {
    Glibc.mlock(addr, len)
  }

  /// `munlock(2)`.
  @discardableResult
  package static func munlock(_ addr: UnsafeRawPointer?, _ len: Int) -> Int32 {
    Glibc.munlock(addr, len)
  }
}
