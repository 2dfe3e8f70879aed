import Foundation

/// A Unix stream socket in the abstract namespace that carries one JSON line each way per
/// connection: the channel between an app's supervisor and the commands that talk to it.
///
/// Abstract names need no directory the app user could reach (`.protfs/` is root's alone), vanish
/// with the process that bound them, and cannot be bound twice, which makes the bind itself the
/// "already running" check. Who may talk is decided by the peer's credentials (`SO_PEERCRED`).
public enum ControlSocket {
  /// The most bytes one line may have.
  public static let maximumLine = 64 * 1024

  private static func address(_ name: String) -> (sockaddr_un, socklen_t) {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(name.utf8.prefix(MemoryLayout.size(ofValue: address.sun_path) - 1))
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
      raw[0] = 0  // the abstract namespace
      for (index, byte) in bytes.enumerated() { raw[index + 1] = byte }
    }
    let length = MemoryLayout<sa_family_t>.size + 1 + bytes.count
    return (address, socklen_t(length))
  }

  private static func makeSocket(_ name: String) throws(ProtFSError) -> FileDescriptor {
    FileDescriptor(
      owning: try valueOrErrno(.socket) {
        socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
      }
      .orThrow("create the socket", path: "@" + name))
  }

  /// Binds and listens on `@name`; throws `.alreadyExists` when another process holds the name.
  public static func listen(_ name: String) throws(ProtFSError) -> FileDescriptor {
    let socket = try makeSocket(name)
    var (address, length) = address(name)
    let bound = withUnsafePointer(to: &address) { pointer in
      pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
        valueOrErrno(.bind) { bind(socket.rawValue, raw, length) }
      }
    }
    if case .failure(let error) = bound {
      throw ProtFSError.system("bind the socket", path: "@" + name, errno: error.rawValue)
    }
    _ = try valueOrErrno(.listen) { Foundation.listen(socket.rawValue, 16) }.orThrow("listen on", path: "@" + name)
    return socket
  }

  /// Accepts the next connection; returns it with the peer's user id, or nil once `listener` was shut down.
  public static func accept(_ listener: FileDescriptor) -> (FileDescriptor, uid_t, pid_t)? {
    while true {
      switch valueOrErrno(.accept, { Foundation.accept(listener.rawValue, nil, nil) }) {
      case .success(let fd):
        let connection = FileDescriptor(owning: fd)
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        // struct ucred (pid, uid, gid), which Glibc shows Swift only under _GNU_SOURCE.
        var credentials = [Int32](repeating: -1, count: 3)
        var size = socklen_t(MemoryLayout<Int32>.size * 3)
        let asked = credentials.withUnsafeMutableBytes { raw in
          valueOrErrno(.getsockopt) { getsockopt(fd, SOL_SOCKET, SO_PEERCRED, raw.baseAddress, &size) }
        }
        guard case .success = asked else { continue }
        return (connection, uid_t(bitPattern: credentials[1]), credentials[0])
      case .failure(let error) where error.rawValue == ECONNABORTED: continue
      case .failure: return nil
      }
    }
  }

  /// Connects to `@name`; throws `.notFound` when nobody listens there.
  public static func connect(_ name: String) throws(ProtFSError) -> FileDescriptor {
    let socket = try makeSocket(name)
    var (address, length) = address(name)
    let connected = withUnsafePointer(to: &address) { pointer in
      pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
        valueOrErrno(.connect) { Foundation.connect(socket.rawValue, raw, length) }
      }
    }
    if case .failure(let error) = connected {
      let code = error.rawValue == ECONNREFUSED ? ENOENT : error.rawValue
      throw ProtFSError.system("connect to", path: "@" + name, errno: code)
    }
    return socket
  }

  /// Reads one line (without its newline); nil at end of file or on an error.
  ///
  /// Looks at what has arrived (`MSG_PEEK`) and takes it up to the newline: a line of thousands of
  /// bytes costs a few calls instead of one per byte, and what follows it stays for the next read.
  public static func readLine(_ connection: FileDescriptor) -> String? {
    var line: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 16 * 1024)
    while line.count < maximumLine {
      let peeked = buffer.withUnsafeMutableBytes { raw in
        valueOrErrno(.read) { recv(connection.rawValue, raw.baseAddress, raw.count, Int32(MSG_PEEK)) }
      }
      guard case .success(let available) = peeked, available > 0 else { return nil }
      let newline = buffer[..<available].firstIndex(of: 0x0A)
      let wanted = newline.map { $0 + 1 } ?? available
      let taken = buffer.withUnsafeMutableBytes { raw in
        valueOrErrno(.read) { recv(connection.rawValue, raw.baseAddress, wanted, 0) }
      }
      guard case .success(let count) = taken, count == wanted else { return nil }
      if let newline {
        line += buffer[..<newline]
        return line.count <= maximumLine ? String(decoding: line, as: UTF8.self) : nil
      }
      line += buffer[..<count]
    }
    return nil
  }

  /// Writes `line` and a newline; returns whether all of it was written.
  @discardableResult
  public static func writeLine(_ connection: FileDescriptor, _ line: String) -> Bool {
    (try? AtomicFile.writeAll(connection.rawValue, Array(line.utf8) + [0x0A], path: "socket")) != nil
  }

  /// Stops `accept` on `listener` (from another thread).
  public static func shutDown(_ listener: FileDescriptor) { _ = shutdown(listener.rawValue, Int32(SHUT_RDWR)) }
}
