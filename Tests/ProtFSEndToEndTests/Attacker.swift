import Foundation
import ProtFSTestSupport
import Testing

/// Hostile programs for the trust-boundary tests, run as the attacker would run them: Python
/// (nothing of protfs's), as `nobody` or as the app user (501) outside any app, against root's
/// services. The scripts live in a directory every user can read.
struct Attacker {
  /// `nobody`.
  static let nobody: uid_t = 65534
  /// The app user, as a process that is not an app's.
  static let appUser: uid_t = 501

  /// The scripts' directory.
  let directory: String

  init() throws {
    directory = try TestDevice.makeTemporaryDirectory(prefix: "protfs-attacker")
    chmod(directory, 0o755)
    for (name, text) in [
      ("client.py", Self.client), ("hold.py", Self.hold), ("squat.py", Self.squat), ("flood.py", Self.flood),
      ("resume.py", Self.resume), ("swap.py", Self.swap), ("sequence.py", Self.sequence),
      ("trickle.py", Self.trickle),
    ] {
      let path = directory + "/" + name
      try text.write(toFile: path, atomically: true, encoding: .utf8)
      chmod(path, 0o755)
    }
  }

  func remove() { TestDevice.removeTree(directory) }

  /// `python3 SCRIPT ARGS` as `uid`, through setpriv (no groups, no capabilities).
  func command(as uid: uid_t, _ script: String, _ arguments: [String]) -> [String] {
    [
      "/usr/bin/setpriv", "--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "--inh-caps=-all",
      "/usr/bin/python3", directory + "/" + script,
    ] + arguments
  }

  /// Runs `script` as `uid` to its end.
  func run(as uid: uid_t, _ script: String, _ arguments: [String], stdin: String? = nil) async throws -> RunResult {
    let command = command(as: uid, script, arguments)
    return try await Protfs.runProgram(command[0], Array(command.dropFirst()), stdin: stdin)
  }

  /// Starts `script` as `uid`; it runs until its standard input closes (`Running.stop()`).
  func start(as uid: uid_t, _ script: String, _ arguments: [String]) throws -> Running {
    try Running(command(as: uid, script, arguments))
  }

  /// A hostile program running in the background, read line by line.
  final class Running: @unchecked Sendable {
    let process = TestProcess()
    private let input = Pipe()
    private let output = Pipe()

    init(_ command: [String]) throws {
      process.executableURL = URL(fileURLWithPath: command[0])
      process.arguments = Array(command.dropFirst())
      process.standardInput = input
      process.standardOutput = output
      try process.start()
    }

    /// Everything it printed up to a line containing `text` (or its end).
    func read(until text: String) async -> String {
      let reader = output.fileHandleForReading
      return String(decoding: await offPool { reader.read(until: text) }, as: UTF8.self)
    }

    /// Tells it to go on (a line on its standard input).
    func proceed() { input.fileHandleForWriting.write(Data("go\n".utf8)) }

    /// Ends it and waits.
    func stop() {
      try? input.fileHandleForWriting.close()
      if process.isRunning { kill(process.processIdentifier, SIGKILL) }
      process.waitUntilExit()
    }
  }

  /// One request line to `@NAME`, its answer printed as "reply: …"; with `--wait`, connects only
  /// after a line on standard input.
  static let client = """
    import socket, sys
    if "--wait" in sys.argv:
        sys.argv.remove("--wait")
        print("waiting", flush=True)
        sys.stdin.readline()
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect("\\0" + sys.argv[1].lstrip("@"))
    try:
        connection.sendall(sys.argv[2].encode() + b"\\n")
    except OSError:
        pass  # turned away before it could send: the answer is there to read all the same
    reply = b""
    while not reply.endswith(b"\\n"):
        chunk = connection.recv(65536)
        if not chunk:
            break
        reply += chunk
    print("reply: " + reply.decode(errors="replace").strip(), flush=True)
    """

  /// Opens COUNT connections to `@NAME` and holds them, sending nothing; prints how many it
  /// holds, then how many were turned away at once with an answer ("refused N"), closed without
  /// one ("closed N") and are still open a second later ("open N"); then holds the rest until it
  /// is killed.
  static let hold = """
    import resource, select, signal, socket, sys, time
    name, count = sys.argv[1].lstrip("@"), int(sys.argv[2])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, count + 64)), hard))
    held = []
    for _ in range(count):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect("\\0" + name)
        except OSError:
            s.close()
            continue
        held.append(s)
    print("held %d" % len(held), flush=True)
    refused, closed, pending = 0, 0, set(held)
    deadline = time.monotonic() + 1
    while pending and time.monotonic() < deadline:
        ready, _, _ = select.select(list(pending), [], [], max(0, deadline - time.monotonic()))
        for s in ready:
            pending.discard(s)
            if s.recv(65536):
                refused += 1
            else:
                closed += 1
    print("refused %d" % refused, flush=True)
    print("closed %d" % closed, flush=True)
    print("open %d" % len(pending), flush=True)
    while True:
        signal.pause()
    """

  /// Sends `@NAME` the start of a request line and then one byte every INTERVAL seconds, COUNT
  /// bytes at most, never a newline; prints "closed after N" once the service has let the
  /// connection go (N bytes sent), else "sent N".
  static let trickle = """
    import select, socket, sys, time
    name, count, interval = sys.argv[1].lstrip("@"), int(sys.argv[2]), float(sys.argv[3])
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect("\\0" + name)
    connection.sendall(b'{"kind":"ping"')
    sent = 0
    for _ in range(count):
        readable, _, _ = select.select([connection], [], [], interval)
        if readable and not connection.recv(65536):
            print("closed after %d" % sent, flush=True)
            sys.exit(0)
        try:
            connection.sendall(b" ")
        except OSError:
            print("closed after %d" % sent, flush=True)
            sys.exit(0)
        sent += 1
    print("sent %d" % sent, flush=True)
    """

  /// Binds `@NAME` before the service and answers every line as a service would like to be
  /// believed: its own pid to a ping, nothing wrong to anything else.
  static let squat = """
    import os, signal, socket, sys, threading
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind("\\0" + sys.argv[1])
    server.listen(64)
    print("bound %d" % os.getpid(), flush=True)
    def answer(connection):
        try:
            data = connection.recv(65536)
            reply = b'{"pid":%d}' % os.getpid() if b'"ping"' in data else b'{"notCompleted":[]}'
            connection.sendall(reply + b"\\n")
        finally:
            connection.close()
    def serve():
        while True:
            connection, _ = server.accept()
            threading.Thread(target=answer, args=(connection,), daemon=True).start()
    threading.Thread(target=serve, daemon=True).start()
    while True:
        signal.pause()
    """

  /// The session-service calls the app attacks make: one request a connection, the reply parsed.
  static let calls = """
    import base64, json, socket, sys, time
    def call(name, request):
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.connect("\\0" + name.lstrip("@"))
        connection.sendall(json.dumps(request).encode() + b"\\n")
        reply = b""
        while not reply.endswith(b"\\n"):
            chunk = connection.recv(1 << 20)
            if not chunk:
                break
            reply += chunk
        connection.close()
        return json.loads(reply or b"{}")
    def say(**fields):
        print(json.dumps(fields), flush=True)
    """

  /// Sends each request line after NAME on a connection of its own, in order; prints each reply as
  /// a JSON line `{"step": N, "reply": …}`, then `{"step": "done"}`.
  static let sequence =
    calls + "\n" + """
      for step, line in enumerate(sys.argv[2:]):
          say(step=step, reply=call(sys.argv[1], json.loads(line)))
      say(step="done")
      """

  /// As the app: opens its session (OPEN, a request line), then tries FORGED (base64 resume data
  /// naming any file) with TEMPLATE (a createDownloadTask line); then makes a real task, waits until
  /// it has bytes, cancels it for its resume data (Apple's keyed archive), rewrites that data as an
  /// app may (another URL, another file, a count past the file, a path out of the directory) and
  /// tries each, then garbage and a plist bomb; moves its own file SECRET (absolute) to the temp
  /// file's name in DOWNLOADS and resumes the real data. Prints each outcome as a JSON line.
  static let resume =
    calls + "\n" + """
      import copy, os, plistlib
      name, opened, template, forged, secret, downloads = sys.argv[1:7]
      say(step="open", reply=call(name, json.loads(opened)))
      def attempt(step, data, **extra):
          request = json.loads(template)
          request["resumeData"] = base64.b64encode(data).decode()
          reply = call(name, request)
          say(step=step, reply=reply, **extra)
          return reply
      attempt("forged", base64.b64decode(forged))
      fresh = json.loads(template)
      created = call(name, fresh)
      task = created["snapshot"]["id"]
      session = fresh["session"]
      call(name, {"kind": "resume", "session": session, "task": task})
      for _ in range(500):
          listed = call(name, {"kind": "tasks", "session": session}).get("snapshots", [])
          if any(t["id"] == task and t["bytesReceived"] > 0 for t in listed):
              break
          time.sleep(0.02)
      data = base64.b64decode(
          call(name, {"kind": "cancel", "session": session, "task": task, "producingResumeData": True})["resumeData"])
      archive = plistlib.loads(data)
      objects = archive["$objects"]
      root = objects[archive["$top"]["root"].data]
      fields = {objects[k.data]: objects[v.data] for k, v in zip(root["NS.keys"], root["NS.objects"])}
      temporary = fields["NSURLSessionResumeInfoTempFileName"]
      def rewritten(key, value):
          copied = copy.deepcopy(archive)
          copied["$objects"].append(value)
          top = copied["$objects"][copied["$top"]["root"].data]
          for index, k in enumerate(top["NS.keys"]):
              if copied["$objects"][k.data] == key:
                  top["NS.objects"][index] = plistlib.UID(len(copied["$objects"]) - 1)
          return plistlib.dumps(copied, fmt=plistlib.FMT_BINARY)
      attempt("otherURL", rewritten("NSURLSessionDownloadURL", fields["NSURLSessionDownloadURL"] + "?x"))
      attempt("otherFile", rewritten("NSURLSessionResumeInfoTempFileName", "CFNetworkDownload_zzzzzz.tmp"))
      attempt("pastFile", rewritten("NSURLSessionResumeBytesReceived", 1 << 40))
      attempt("outside", rewritten("NSURLSessionResumeInfoTempFileName", "../../../../.protfs/lock-state.json"))
      attempt("garbage", os.urandom(4096))
      bomb = [1]
      for _ in range(40):
          bomb = [bomb, bomb]
      attempt("bomb", plistlib.dumps({"NSURLSessionDownloadURL": bomb}, fmt=plistlib.FMT_BINARY))
      os.rename(secret, downloads + "/" + temporary)
      resumed = attempt("swapped", data, temporaryFileName=temporary)
      call(name, {"kind": "resume", "session": session, "task": resumed["snapshot"]["id"]})
      say(step="done")
      while True:
          time.sleep(3600)
      """

  /// As the app: while one thread swaps DECOY and SECRET (absolute paths, same directory) with
  /// renameat2(RENAME_EXCHANGE) as fast as it can, asks for COUNT upload tasks of DECOY
  /// (TEMPLATE: a createUploadTask line without its path); prints how many were made and refused.
  static let swap =
    calls + "\n" + """
      import ctypes, threading
      name, opened, template, decoy, secret, count = sys.argv[1:7]
      call(name, json.loads(opened))
      libc = ctypes.CDLL("libc.so.6", use_errno=True)
      stop = threading.Event()
      swaps = [0]
      def swapping():
          while not stop.is_set():
              if libc.renameat2(-100, decoy.encode(), -100, secret.encode(), 2) == 0:
                  swaps[0] += 1
      threading.Thread(target=swapping, daemon=True).start()
      made, refused = 0, 0
      for _ in range(int(count)):
          request = json.loads(template)
          request["path"] = decoy
          if "error" in call(name, request):
              refused += 1
          else:
              made += 1
      stop.set()
      say(made=made, refused=refused, swaps=swaps[0])
      while True:
          time.sleep(3600)
      """

  /// Sends `@NAME` one line of SIZE bytes of garbage (without a newline when `--unended`),
  /// prints what came back ("answer: …"; empty when the service just closed the connection).
  static let flood = """
    import socket, sys
    name, size = sys.argv[1], int(sys.argv[2])
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect("\\0" + name)
    garbage = b"x" * size + (b"" if "--unended" in sys.argv else b"\\n")
    try:
        connection.sendall(garbage)
    except OSError:
        pass
    connection.shutdown(socket.SHUT_WR) if "--unended" in sys.argv else None
    reply = b""
    try:
        while not reply.endswith(b"\\n"):
            chunk = connection.recv(65536)
            if not chunk:
                break
            reply += chunk
    except OSError:
        pass
    print("answer: " + reply.decode(errors="replace").strip(), flush=True)
    """
}
