import CProtFSSys
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
      throw ProtFSError.system("bind the socket", path: "@" + name, errno: error)
    }
    _ = try valueOrErrno(.listen) { Foundation.listen(socket.rawValue, 16) }.orThrow("listen on", path: "@" + name)
    return socket
  }

  /// Binds and listens on `@name`, as `listen(_:)`, when the name may still be held for a moment
  /// by a listener that is going away: its descriptor lives on in a child that was being started
  /// when it closed (a fork holds every descriptor until its `exec`), so the name stays bound a
  /// few milliseconds after its owner let go. While `line` (a request the service answers) gets
  /// no answer there within a short wait, the bind is tried again, for up to `settling` seconds;
  /// a name that answers, or is still held after that, throws as `listen(_:)` does.
  public static func listen(_ name: String, settling: Double, probe line: String) throws(ProtFSError) -> FileDescriptor
  {
    let deadline = Date().addingTimeInterval(settling)
    while true {
      do {
        return try listen(name)
      } catch  where error.errno == EADDRINUSE {
        if Date() >= deadline || answers(name, line) { throw error }
        usleep(20_000)
      }
    }
  }

  /// Listens on `@name` as one of protfs's services, as `listen(_:settling:probe:)`; returns nil
  /// when the name is held by a process of a user in `servers` (the service already runs), and
  /// throws naming the process when anyone else holds it (a squatter, who must not be taken for
  /// the service). `subject` says what could not start ("The app X cannot be launched"),
  /// `service` what the socket's owner should be ("supervisor"), `retry` how to start again.
  public static func listenAsService(
    _ name: String, settling: Double, probe line: String, trusting servers: Set<uid_t>, subject: String,
    service: String, retry: String
  ) throws(ProtFSError) -> FileDescriptor? {
    do {
      return try listen(name, settling: settling, probe: line)
    } catch  where error.code == .alreadyExists || error.errno == EADDRINUSE {
      guard let holder = untrustedHolder(of: name, trusting: servers) else { return nil }
      throw ProtFSError(
        .permissionDenied,
        "\(subject): its socket '@\(name)' is held by process \(holder.pid) of user \(holder.uid), which is not a protfs \(service).",
        path: "@" + name, errno: EADDRINUSE, remedy: .advice("end process \(holder.pid), then \(retry)"))
    }
  }

  /// Whether whoever listens on `@name` answers `line` within 200 ms.
  private static func answers(_ name: String, _ line: String) -> Bool {
    guard let socket = try? connect(name) else { return false }
    defer { socket.close() }
    var wait = timeval(tv_sec: 0, tv_usec: 200_000)
    _ = setsockopt(socket.rawValue, SOL_SOCKET, SO_RCVTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
    _ = setsockopt(socket.rawValue, SOL_SOCKET, SO_SNDTIMEO, &wait, socklen_t(MemoryLayout<timeval>.size))
    return writeLine(socket, line) && readLine(socket) != nil
  }

  /// Accepts the next connection; returns it with its peer's credentials, or nil once `listener`
  /// was shut down.
  ///
  /// A service must not die of load: when the process or the system is out of descriptors or
  /// memory (`EMFILE`, `ENFILE`, `ENOBUFS`, `ENOMEM`) it waits a little, longer each time (1 ms
  /// up to 100 ms), and goes on; a connection that went away before it was taken is skipped.
  public static func accept(_ listener: FileDescriptor) -> (FileDescriptor, PeerCredentials)? {
    var backoff: useconds_t = 1_000
    while true {
      switch valueOrErrno(.accept, { protfs_accept_cloexec(listener.rawValue) }) {
      case .success(let fd):
        backoff = 1_000
        let connection = FileDescriptor(owning: fd)
        guard let peer = PeerCredentials(of: connection) else { continue }
        return (connection, peer)
      case .failure(let error) where [EMFILE, ENFILE, ENOBUFS, ENOMEM].contains(error.rawValue):
        usleep(backoff)
        backoff = min(backoff * 2, 100_000)
      case .failure(let error) where [ECONNABORTED, EPROTO, EPERM, EAGAIN].contains(error.rawValue):
        continue
      case .failure:
        // EINVAL after `shutDown`, EBADF once closed: the listener is done.
        return nil
      }
    }
  }

  /// Who a client believes: root, and the client's own user (a device run without root runs its
  /// services as its user) unless that is `untrusted`, the user apps run as: an app's process
  /// believes only root's services, never one another app (or it) bound first.
  public static func trustedServers(untrusted: uid_t) -> Set<uid_t> {
    let own = geteuid()
    return own == untrusted ? [0] : [0, own]
  }

  /// Connects to `@name`; throws `.notFound` when nobody listens there, and `.permissionDenied`
  /// when the process listening there runs as none of `servers` (anyone can bind an abstract
  /// name first: a client must not believe what such a process answers).
  public static func connect(_ name: String, servers: Set<uid_t>) throws(ProtFSError) -> FileDescriptor {
    let socket = try connect(name)
    guard let server = PeerCredentials(of: socket) else {
      throw ProtFSError(.io, "The process at '@\(name)' went away as it was reached.", path: "@" + name)
    }
    guard servers.contains(server.uid) else {
      socket.close()
      throw ProtFSError(
        .permissionDenied,
        "The socket '@\(name)' is held by process \(server.pid) of user \(server.uid), not by a protfs service of user \(servers.sorted().map(String.init).joined(separator: " or ")); protfs does not talk to it.",
        path: "@" + name, errno: EPERM,
        remedy: .advice("end process \(server.pid), then start the service again"))
    }
    return socket
  }

  /// The process listening on `@name` when it runs as none of `servers` (a squatter that bound
  /// a service's name first); nil when nobody listens or a trusted process does.
  public static func untrustedHolder(of name: String, trusting servers: Set<uid_t>) -> PeerCredentials? {
    guard let socket = try? connect(name) else { return nil }
    defer { socket.close() }
    guard let holder = PeerCredentials(of: socket), !servers.contains(holder.uid) else { return nil }
    return holder
  }

  /// Connects to `@name` whoever listens there; throws `.notFound` when nobody does.
  static func connect(_ name: String) throws(ProtFSError) -> FileDescriptor {
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

  /// Reads one line (without its newline) of at most `limit` bytes; nil at end of file, on an
  /// error, for a longer line, or for one whose rest does not come within `within` seconds of its
  /// first bytes.
  ///
  /// Looks at what has arrived (`MSG_PEEK`) and takes it up to the newline: a line of thousands of
  /// bytes costs a few calls instead of one per byte, and what follows it stays for the next read.
  /// The wait for a line's first bytes is the socket's own (`limitWaits`); `within` bounds the
  /// rest, so that a peer sending a byte now and then cannot hold the connection for ever.
  public static func readLine(_ connection: FileDescriptor, limit: Int = maximumLine, within: Double? = nil)
    -> String?
  {
    guard case .line(let line) = nextLine(connection, limit: limit, within: within) else { return nil }
    return line
  }

  /// What `nextLine` read.
  public enum LineRead: Equatable, Sendable {
    /// A whole line, without its newline.
    case line(String)
    /// More than the limit came without a newline: the peer is to be told, and let go.
    case tooLong
    /// End of file, an error, or a line whose rest did not come in time.
    case ended
  }

  /// As `readLine`, telling a line longer than `limit` from the end of the connection, so that a
  /// service can answer it before it lets the peer go.
  public static func nextLine(_ connection: FileDescriptor, limit: Int = maximumLine, within: Double? = nil)
    -> LineRead
  {
    var line: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 16 * 1024)
    var deadline: ContinuousClock.Instant?
    while line.count < limit {
      if let deadline {
        // The line has begun: its rest must come before the deadline.
        let left = (deadline - .now).components
        let milliseconds = left.seconds * 1000 + left.attoseconds / 1_000_000_000_000_000 + 1
        guard milliseconds > 1 else { return .ended }
        var entry = pollfd(fd: connection.rawValue, events: Int16(POLLIN), revents: 0)
        let waited = valueOrErrno(.poll) { poll(&entry, 1, Int32(min(milliseconds, 3_600_000))) }
        guard case .success(let ready) = waited, ready == 1 else { return .ended }
      }
      let peeked = buffer.withUnsafeMutableBytes { raw in
        valueOrErrno(.read) { recv(connection.rawValue, raw.baseAddress, raw.count, Int32(MSG_PEEK)) }
      }
      guard case .success(let available) = peeked, available > 0 else { return .ended }
      let newline = buffer[..<available].firstIndex(of: 0x0A)
      let wanted = newline.map { $0 + 1 } ?? available
      let taken = buffer.withUnsafeMutableBytes { raw in
        valueOrErrno(.read) { recv(connection.rawValue, raw.baseAddress, wanted, 0) }
      }
      guard case .success(let count) = taken, count == wanted else { return .ended }
      if let newline {
        line += buffer[..<newline]
        return line.count <= limit ? .line(String(decoding: line, as: UTF8.self)) : .tooLong
      }
      line += buffer[..<count]
      if deadline == nil, let within { deadline = .now + .seconds(within) }
    }
    return .tooLong
  }

  /// Writes `line` and a newline; returns whether all of it was written. A peer that went away
  /// is a failed write (`MSG_NOSIGNAL`), never a SIGPIPE that ends the process: a service, or a
  /// test process hosting one, must outlive any client.
  @discardableResult
  public static func writeLine(_ connection: FileDescriptor, _ line: String) -> Bool {
    writeAll(Array(line.utf8) + [0x0A], on: connection)
  }

  /// Writes all of `bytes` on `connection`; returns whether it did. A send that waited out the
  /// socket's send limit (`limitWaits`: the peer reads nothing) is given up, unless `waitAgain`
  /// says to go on waiting (a subscription's writer, whose app may be frozen); any other failure,
  /// a peer gone included (`MSG_NOSIGNAL`: never a SIGPIPE), ends it.
  public static func writeAll(_ bytes: [UInt8], on connection: FileDescriptor, waitAgain: () -> Bool = { false })
    -> Bool
  {
    var sent = 0
    while sent < bytes.count {
      let result = bytes.withUnsafeBytes { raw in
        valueOrErrno(.write) {
          send(connection.rawValue, raw.baseAddress! + sent, raw.count - sent, Int32(MSG_NOSIGNAL))
        }
      }
      switch result {
      case .success(let count) where count > 0: sent += count
      case .failure(let error) where (error.rawValue == EAGAIN || error.rawValue == EWOULDBLOCK) && waitAgain():
        continue
      default: return false
      }
    }
    return true
  }

  /// How long a service waits for a peer's next line, or for room to write its answer, before it
  /// lets the connection go: an idle or stuck peer cannot hold a thread of the service for ever.
  public static let peerTimeout = timeval(tv_sec: 10, tv_usec: 0)

  /// How long a service gives a peer to finish a line it has begun (`readLine(within:)`), in
  /// seconds: `peerTimeout` bounds each wait, this the whole line.
  public static let lineTimeout = 10.0

  /// Bounds how long reads and writes on `connection` may wait (`peerTimeout`; `reads: false`
  /// lets reads wait without end, for a subscription whose peer speaks only now and then).
  public static func limitWaits(_ connection: FileDescriptor, reads: Bool = true) {
    var limit = peerTimeout
    var read = reads ? peerTimeout : timeval(tv_sec: 0, tv_usec: 0)
    let size = socklen_t(MemoryLayout<timeval>.size)
    _ = setsockopt(connection.rawValue, SOL_SOCKET, SO_RCVTIMEO, &read, size)
    _ = setsockopt(connection.rawValue, SOL_SOCKET, SO_SNDTIMEO, &limit, size)
  }

  /// Answers `connection` with `line` without waiting (a peer that does not read loses it) and
  /// closes it: how a service turns a peer away before giving it anything.
  public static func refuse(_ connection: FileDescriptor, line: String) {
    let bytes = Array(line.utf8) + [0x0A]
    _ = bytes.withUnsafeBytes { raw in
      send(connection.rawValue, raw.baseAddress, raw.count, Int32(MSG_DONTWAIT) | Int32(MSG_NOSIGNAL))
    }
    connection.close()
  }

  /// Whether the peer of `connection` has closed it (`POLLHUP`; a peer that only ended its
  /// writing still waits for the answer).
  public static func hasHungUp(_ connection: FileDescriptor) -> Bool {
    var entry = pollfd(fd: connection.rawValue, events: 0, revents: 0)
    guard case .success(let ready) = valueOrErrno(.poll, { poll(&entry, 1, 0) }), ready == 1 else { return false }
    return entry.revents & Int16(POLLHUP | POLLERR) != 0
  }

  /// Stops `accept` on `listener` (from another thread).
  public static func shutDown(_ listener: FileDescriptor) { _ = shutdown(listener.rawValue, Int32(SHUT_RDWR)) }
}

/// The other end of a Unix socket connection, as the kernel recorded it when it connected
/// (`SO_PEERCRED`), and that process itself as a descriptor (`SO_PEERPIDFD`) where the kernel
/// gives one.
public struct PeerCredentials: Sendable {
  /// The peer's process id when it connected.
  public var pid: pid_t
  /// Its user.
  public var uid: uid_t
  /// Its group.
  public var gid: gid_t
  /// The process that connected (Linux 6.5+), which keeps its pid from being given to another
  /// process until it is reaped; nil on older kernels.
  public let process: FileDescriptor?

  /// Credentials as given.
  public init(pid: pid_t, uid: uid_t, gid: gid_t, process: FileDescriptor? = nil) {
    self.pid = pid
    self.uid = uid
    self.gid = gid
    self.process = process
  }

  /// The credentials of `connection`'s peer; nil when the kernel has none to give.
  public init?(of connection: FileDescriptor) {
    // struct ucred (pid, uid, gid), which Glibc shows Swift only under _GNU_SOURCE.
    var credentials = [Int32](repeating: -1, count: 3)
    var size = socklen_t(MemoryLayout<Int32>.size * 3)
    let asked = credentials.withUnsafeMutableBytes { raw in
      valueOrErrno(.getsockopt) { getsockopt(connection.rawValue, SOL_SOCKET, SO_PEERCRED, raw.baseAddress, &size) }
    }
    guard case .success = asked, credentials[0] > 0 else { return nil }
    let pidfd = valueOrErrno(.getsockopt) { protfs_peer_pidfd(connection.rawValue) }
    self.init(
      pid: credentials[0], uid: uid_t(bitPattern: credentials[1]), gid: gid_t(bitPattern: credentials[2]),
      process: (try? pidfd.get()).map { FileDescriptor(owning: $0) })
  }

  /// Whether `pid` is still the process that connected: what was read of `/proc/PID` before this
  /// answered true was read of that process. Without a process descriptor, whether the pid is
  /// taken at all (a weaker answer: the kernel gave no way to know more).
  public var isStillConnectedProcess: Bool {
    if let process, process.isOpen { return protfs_pidfd_alive(process.rawValue) == 0 }
    return ProcessIdentity.isRunning(pid)
  }
}
