import Foundation

/// A small Python HTTP server on 127.0.0.1 that takes PUT and POST uploads, for the upload tests
/// and benchmark. It answers `{"received": N, "sha256": "...", "method": "PUT"}` (201 for PUT, 200
/// for POST), can fail the first requests with 500, answers `/status/CODE` with that status, asks
/// for HTTP Basic or Digest credentials under `/auth/basic|digest/USER/PASS/`, sets a cookie for
/// `/cookie/NAME/VALUE/` and on a redirect with `?cookie=NAME=VALUE` (and answers the `Cookie` it
/// got), and records each request's method, path and headers. Started by `init`, stopped (SIGKILL, waitpid)
/// by `stop()` or when released.
public final class UploadServer: @unchecked Sendable {
  // @unchecked: `pid` is written by `stop()` under `lock` only.
  /// The port it listens on.
  public let port: UInt16
  private let directory: URL
  private var pid: pid_t
  private let lock = NSLock()

  /// A request the server took, as it recorded it.
  public struct Request: Sendable, Decodable {
    /// PUT or POST.
    public var method: String
    /// The request target.
    public var path: String
    /// The headers, names lowercased.
    public var headers: [String: String]
    /// The body's size.
    public var received: Int
    /// The status answered.
    public var status: Int
  }

  /// The URL of `path` on this server.
  public func url(_ path: String = "upload") -> URL { URL(string: "http://127.0.0.1:\(port)/\(path)")! }

  /// Starts the server; the first `failFirst` requests get 500.
  public init(failFirst: Int = 0, python: String = "/usr/bin/python3") throws {
    directory = FileManager.default.temporaryDirectory.appendingPathComponent("protfs-upload-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    let script = directory.appendingPathComponent("server.py")
    try Self.script.write(to: script, atomically: true, encoding: .utf8)
    let portFile = directory.appendingPathComponent("port").path
    let log = directory.appendingPathComponent("requests.jsonl").path
    let arguments = [python, script.path, portFile, log, String(failFirst)]
    var pid: pid_t = 0
    let argv = arguments.map { strdup($0) } + [nil]
    defer { for a in argv { free(a) } }
    // The test process's threads block signals that the server must take: start it with none
    // blocked and default handlers.
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var none = sigset_t()
    sigemptyset(&none)
    var all = sigset_t()
    sigfillset(&all)
    posix_spawnattr_setsigmask(&attributes, &none)
    posix_spawnattr_setsigdefault(&attributes, &all)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    let rc = posix_spawn(&pid, python, nil, &attributes, argv, environ)
    guard rc == 0 else { throw POSIXError(POSIXErrorCode(rawValue: rc) ?? .EIO) }
    self.pid = pid
    // The server writes its port once it listens (renamed into place, so it is whole when seen).
    let deadline = Date().addingTimeInterval(20)
    while Date() < deadline {
      if let text = try? String(contentsOfFile: portFile, encoding: .utf8), let port = UInt16(text) {
        self.port = port
        return
      }
      var status: Int32 = 0
      if waitpid(pid, &status, WNOHANG) == pid { break }
      usleep(5000)
    }
    kill(pid, SIGKILL)
    var status: Int32 = 0
    waitpid(pid, &status, 0)
    try? FileManager.default.removeItem(at: directory)
    throw NSError(domain: "UploadServer", code: 1, userInfo: [NSLocalizedDescriptionKey: "the server did not start"])
  }

  /// The requests answered so far, oldest first.
  public var requests: [Request] {
    let log = directory.appendingPathComponent("requests.jsonl").path
    let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
    return text.split(separator: "\n").compactMap { try? JSONDecoder().decode(Request.self, from: Data($0.utf8)) }
  }

  /// Stops the server and removes its directory.
  public func stop() {
    lock.lock()
    defer { lock.unlock() }
    guard pid > 0 else { return }
    // SIGKILL: the server keeps nothing that needs an orderly end.
    kill(pid, SIGKILL)
    var status: Int32 = 0
    while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
    pid = 0
    try? FileManager.default.removeItem(at: directory)
  }

  deinit { stop() }

  /// The server (also run by benchmarks/upload.sh): `server.py PORT-FILE LOG FAIL-FIRST`.
  public static let script = #"""
    import base64, hashlib, http.server, json, os, re, signal, socketserver, sys, threading

    port_file, log_file, fail_first = sys.argv[1], sys.argv[2], int(sys.argv[3])
    lock = threading.Lock()
    state = {"count": 0}

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def body(self):
            digest, received = hashlib.sha256(), 0
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                while True:
                    size = int(self.rfile.readline().split(b";")[0], 16)
                    if size == 0:
                        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass
                        break
                    chunk = self.rfile.read(size)
                    digest.update(chunk)
                    received += len(chunk)
                    self.rfile.readline()
            else:
                left = int(self.headers.get("Content-Length", "0"))
                while left > 0:
                    chunk = self.rfile.read(min(left, 1 << 20))
                    if not chunk:
                        break
                    digest.update(chunk)
                    received += len(chunk)
                    left -= len(chunk)
            return received, digest.hexdigest()

        def redirect(self, received):
            # /redirect/CODE/REST answers CODE with Location /REST; /loop redirects to itself.
            parts = self.path.split("/")
            if self.path == "/loop":
                status, location = 307, "/loop"
            elif len(parts) > 3 and parts[1] == "redirect":
                status, location = int(parts[2]), "/" + "/".join(parts[3:])
            else:
                return False
            with lock, open(log_file, "a") as log:
                headers = {k.lower(): v for k, v in self.headers.items()}
                log.write(json.dumps({"method": self.command, "path": self.path, "headers": headers,
                                      "received": received, "status": status}) + "\n")
            self.send_response(status)
            # ?cookie=NAME=VALUE: the redirect sets that cookie (a login's 302 does).
            if "?cookie=" in self.path:
                self.send_header("Set-Cookie", self.path.split("?cookie=", 1)[1] + "; Path=/")
                location = location.split("?", 1)[0]
            self.send_header("Location", location)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return True

        def authorized(self, received):
            # /auth/basic/USER/PASS/REST and /auth/digest/USER/PASS/REST answer 401, with a challenge
            # of realm "protfs", until the request carries that credential.
            parts = self.path.split("/")
            if len(parts) < 5 or parts[1] != "auth":
                return True
            kind, user, password = parts[2], parts[3], parts[4]
            header = self.headers.get("Authorization", "")
            nonce = "protfs-nonce-1"
            if kind == "basic":
                ok = header == "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
                challenge = 'Basic realm="protfs"'
            else:
                fields = dict(re.findall(r'(\w+)="?([^",]*)"?', header[7:])) if header.startswith("Digest ") else {}
                md5 = lambda text: hashlib.md5(text.encode()).hexdigest()
                ha1 = md5(f"{user}:protfs:{password}")
                ha2 = md5(f"{self.command}:{fields.get('uri', '')}")
                expected = md5(f"{ha1}:{nonce}:{fields.get('nc', '')}:{fields.get('cnonce', '')}:{fields.get('qop', '')}:{ha2}")
                ok = fields.get("username") == user and fields.get("nonce") == nonce and fields.get("response") == expected
                challenge = f'Digest realm="protfs", qop="auth", nonce="{nonce}", algorithm=MD5'
            if ok:
                return True
            data = b"unauthorized"
            with lock, open(log_file, "a") as log:
                headers = {k.lower(): v for k, v in self.headers.items()}
                log.write(json.dumps({"method": self.command, "path": self.path, "headers": headers,
                                      "received": received, "status": 401}) + "\n")
            self.send_response(401)
            self.send_header("WWW-Authenticate", challenge)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return False

        def answer(self):
            received, sha = self.body()
            if self.redirect(received) or not self.authorized(received):
                return
            with lock:
                state["count"] += 1
                failing = state["count"] <= fail_first
            status = 201 if self.command == "PUT" else 200
            if failing:
                status = 500
            elif self.path.startswith("/status/"):
                status = int(self.path.split("/")[2])
            reply = {"received": received, "sha256": sha, "method": self.command, "cookie": self.headers.get("Cookie")}
            if failing:
                reply = {"error": "failing on purpose"}
            data = json.dumps(reply).encode()
            with lock, open(log_file, "a") as log:
                headers = {k.lower(): v for k, v in self.headers.items()}
                log.write(json.dumps({"method": self.command, "path": self.path, "headers": headers,
                                      "received": received, "status": status}) + "\n")
            self.send_response(status)
            # /cookie/NAME/VALUE/REST sets that cookie for the whole server.
            parts = self.path.split("/")
            if len(parts) > 3 and parts[1] == "cookie":
                self.send_header("Set-Cookie", f"{parts[2]}={parts[3]}; Path=/")
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_PUT = answer
        do_POST = answer
        do_GET = answer
        do_PATCH = answer

    class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
        daemon_threads = True
        allow_reuse_address = True

        def handle_error(self, request, client_address):
            # A client that left before its answer (a cancelled or timed-out upload) is expected:
            # no traceback in the tests' output. Anything else is still reported.
            if not isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
                super().handle_error(request, client_address)

    server = Server(("127.0.0.1", 0), Handler)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    with open(port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(port_file + ".tmp", port_file)
    server.serve_forever()
    """#
}
