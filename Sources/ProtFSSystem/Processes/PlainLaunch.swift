import CProtFSSys
import Foundation

/// A program started as a shell starts one (`posix_spawn(3)`, no confinement): its standard
/// input, output and error are given descriptors, every other descriptor stays behind, and it
/// leads a process group of its own with an empty signal mask and SIGPIPE's default disposition.
///
/// Foundation's `Process` does as much, but through a run loop and a manager thread shared by
/// every process of the program, and its `run()` was seen to crash (a bad read in a copy) in a
/// program starting many at once; this is one system call and a `waitpid(2)`.
package struct PlainLaunch {
  /// The program's path (not searched for in `PATH`).
  package var path: String
  /// Its arguments, `arguments[0]` included.
  package var arguments: [String]
  /// Its environment, "NAME=value" entries.
  package var environment: [String]
  /// The descriptors its standard input, output and error are copies of.
  package var input: Int32 = 0
  package var output: Int32 = 1
  package var error: Int32 = 2
  /// The directory it starts in; nil keeps the caller's.
  package var directory: String?
  /// Whether it leads a session of its own (detached from the caller's terminal) rather than a
  /// process group of its own.
  package var newSession = false

  /// A launch of `path` with `arguments` (the first of them its name) and `environment`.
  package init(path: String, arguments: [String], environment: [String]) {
    self.path = path
    self.arguments = arguments
    self.environment = environment
  }

  /// Starts the program: its pid, or why it could not start (a missing program is `ENOENT`).
  package func start() -> Result<pid_t, Errno> {
    let strings = CStrings()
    defer { strings.free() }
    var pid: pid_t = 0
    let result = protfs_spawn_plain(
      &pid, strings.pointer(path), strings.array(arguments), strings.array(environment), input, output, error,
      directory.map { strings.pointer($0) }, newSession ? 1 : 0)
    return result == 0 ? .success(pid) : .failure(Errno(result))
  }
}
