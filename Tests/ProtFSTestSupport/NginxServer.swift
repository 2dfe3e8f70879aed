import Foundation

/// Debian's nginx serving a temporary document root on 127.0.0.1 and an ephemeral port, for tests
/// and benchmarks. Stopped (SIGTERM, then waitpid) by `stop()` or when released.
///
/// Besides the files under `root`, it answers `/redirect/NAME` with a 302 to `/NAME` and `/loop`
/// with a redirect to itself.
public final class NginxServer: @unchecked Sendable {
  // @unchecked: `pid` is written by `stop()` under `lock` only.
  /// The document root; put files here.
  public let root: URL
  /// The port nginx listens on.
  public let port: UInt16
  private let prefix: URL
  private var pid: pid_t
  private let lock = NSLock()

  /// The self-signed certificate of an HTTPS server (PEM), to trust in clients; nil for HTTP.
  public let certificatePath: String?

  private var scheme: String { certificatePath == nil ? "http" : "https" }

  /// http(s)://127.0.0.1:PORT/
  public var baseURL: URL { URL(string: "\(scheme)://127.0.0.1:\(port)/")! }

  /// The URL of `path` (relative to the root).
  public func url(_ path: String) -> URL { URL(string: "\(scheme)://127.0.0.1:\(port)/\(path)")! }

  /// Starts nginx and returns once it accepts connections; with `tls`, it serves HTTPS with a fresh
  /// self-signed certificate for 127.0.0.1 (made with the `openssl` command).
  public init(nginx: String = "/usr/sbin/nginx", tls: Bool = false) throws {
    prefix = FileManager.default.temporaryDirectory.appendingPathComponent("protfs-nginx-\(UUID().uuidString)")
    root = prefix.appendingPathComponent("root")
    try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    try FileManager.default.createDirectory(at: prefix.appendingPathComponent("tmp"), withIntermediateDirectories: true)
    certificatePath = tls ? try Self.makeCertificate(in: prefix) : nil
    var lastError: Error?
    // The free port can be taken between our probe and nginx's bind: try a few.
    for _ in 0..<5 {
      let port = try LoopbackSocket.freePort()
      do {
        pid = try Self.launch(nginx: nginx, prefix: prefix, root: root, port: port, tls: tls)
        self.port = port
        return
      } catch {
        lastError = error
      }
    }
    try? FileManager.default.removeItem(at: prefix)
    throw lastError!
  }

  private static func makeCertificate(in prefix: URL) throws -> String {
    let p = prefix.path
    let arguments = [
      "/usr/bin/openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
      "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", "\(p)/key.pem", "-out", "\(p)/cert.pem",
    ]
    var pid: pid_t = 0
    let argv = arguments.map { strdup($0) } + [nil]
    defer { for a in argv { free(a) } }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    let rc = posix_spawn(&pid, arguments[0], &actions, nil, argv, environ)
    guard rc == 0 else { throw POSIXError(POSIXErrorCode(rawValue: rc) ?? .EIO) }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
    guard status == 0 else {
      throw NSError(domain: "NginxServer", code: 3, userInfo: [NSLocalizedDescriptionKey: "openssl req failed"])
    }
    return "\(p)/cert.pem"
  }

  private static func launch(nginx: String, prefix: URL, root: URL, port: UInt16, tls: Bool) throws -> pid_t {
    let p = prefix.path
    let listen = tls
      ? "listen 127.0.0.1:\(port) ssl; ssl_certificate \(p)/cert.pem; ssl_certificate_key \(p)/key.pem;"
      : "listen 127.0.0.1:\(port);"
    let conf = """
      \(getuid() == 0 ? "user root;" : "")
      worker_processes 1;
      error_log \(p)/error.log warn;
      pid \(p)/nginx.pid;
      events { worker_connections 1024; }
      http {
        access_log off;
        client_body_temp_path \(p)/tmp/body;
        proxy_temp_path \(p)/tmp/proxy;
        fastcgi_temp_path \(p)/tmp/fastcgi;
        uwsgi_temp_path \(p)/tmp/uwsgi;
        scgi_temp_path \(p)/tmp/scgi;
        default_type application/octet-stream;
        sendfile on;
        tcp_nopush on;
        keepalive_requests 1000000;
        server {
          \(listen)
          root \(root.path);
          location /redirect/ { rewrite ^/redirect/(.*)$ /$1 redirect; }
          location = /loop { return 302 /loop; }
        }
      }
      """
    let confPath = prefix.appendingPathComponent("nginx.conf").path
    try conf.write(toFile: confPath, atomically: true, encoding: .utf8)
    let arguments = [nginx, "-p", p, "-c", confPath, "-g", "daemon off;"]
    var pid: pid_t = 0
    let argv = arguments.map { strdup($0) } + [nil]
    defer { for a in argv { free(a) } }
    let rc = posix_spawn(&pid, nginx, nil, nil, argv, environ)
    guard rc == 0 else { throw POSIXError(POSIXErrorCode(rawValue: rc) ?? .EIO) }
    let deadline = Date().addingTimeInterval(10)
    while Date() < deadline {
      if LoopbackSocket.accepts(port: port) { return pid }
      var status: Int32 = 0
      if waitpid(pid, &status, WNOHANG) == pid {
        let log = (try? String(contentsOfFile: "\(p)/error.log", encoding: .utf8)) ?? ""
        throw NSError(domain: "NginxServer", code: 1, userInfo: [NSLocalizedDescriptionKey: "nginx exited: \(log)"])
      }
      usleep(2000)
    }
    kill(pid, SIGKILL)
    var status: Int32 = 0
    waitpid(pid, &status, 0)
    throw NSError(domain: "NginxServer", code: 2, userInfo: [NSLocalizedDescriptionKey: "nginx did not start listening"])
  }

  /// Writes `data` to `path` under the root (creating directories) and returns its URL.
  @discardableResult
  public func put(_ data: Data, at path: String) throws -> URL {
    let file = root.appendingPathComponent(path)
    try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
    try data.write(to: file)
    return url(path)
  }

  /// Stops nginx and removes its temporary directory.
  public func stop() {
    lock.lock()
    defer { lock.unlock() }
    guard pid > 0 else { return }
    kill(pid, SIGTERM)
    var status: Int32 = 0
    while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
    pid = 0
    try? FileManager.default.removeItem(at: prefix)
  }

  deinit { stop() }
}
