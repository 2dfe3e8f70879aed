import Foundation

/// Starts a program detached from the caller (`PlainLaunch` in a session of its own): the launches
/// of `app fetch` and of session events, the session service, and the process that ends a lock's
/// grace, each a protfs of its own.
package enum DetachedLaunch {
  /// Starts `program ARGS` in a session of its own with /dev/null as its standard streams and no
  /// other descriptor: it outlives the caller, and must hold none of the descriptors this process
  /// has (a caller waiting for this command's pipes or its exit socket would wait for it too; a
  /// supervisor's mount connection would stay alive with it). It gets this process's environment.
  /// `purpose` words the error. `output`: a descriptor its standard output and error go to instead.
  package static func start(
    program: String = "/proc/self/exe", _ arguments: [String], purpose: String = "launch the app with",
    output: Int32? = nil
  ) throws(ProtFSError) -> pid_t {
    let null = try valueOrErrno(.open) { open("/dev/null", O_RDWR | O_CLOEXEC) }.orThrow(
      "open", path: "/dev/null")
    defer { closeDescriptor(null) }
    var launch = PlainLaunch(
      path: program, arguments: ["protfs"] + arguments, environment: ProcessEnvironment.entries())
    launch.input = null
    launch.output = output ?? null
    launch.error = output ?? null
    launch.newSession = true
    switch launch.start() {
    case .success(let pid): return pid
    case .failure(let error): throw ProtFSError.system(purpose, path: program, errno: error.rawValue)
    }
  }
}
