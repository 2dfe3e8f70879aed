// CrashingApp: an app that crashes the way its first argument says, as iOS apps crash, so that
// tests can read its crash report: `fatal` (fatalError: SIGILL on x86-64, SIGTRAP on arm64, as
// iOS's), `unwrap` (nil force-unwrapped, the same), `abort`, `segv` (a bad pointer), `bus` (a
// mapped page past the end of a file), `fpe` (an integer division by zero in C), `exception` (an
// exception nothing catches), `thread` (a bad pointer on a background thread named "downloader"),
// and `forged-name` and `forged-far` (false crash records, then a crash that
// sends none: the newest names a thread with a hostile name, or one far out of range).
import Foundation
import ProtFSKit

@MainActor final class AppDelegate: UIApplicationDelegate {
  func application(
    _ application: UIApplication, didFinishLaunchingWithOptions options: [UIApplication.LaunchOptionsKey: Any]?
  ) -> Bool {
    let how = CommandLine.arguments.dropFirst().first ?? "fatal"
    print("crashing: \(how)")
    Crash.now(how)
    print("not reached")
    return true
  }
}

enum Crash {
  static func now(_ how: String) {
    switch how {
    case "fatal": fatalError("crashing on purpose")
    case "unwrap":
      let missing = ProcessInfo.processInfo.environment["CRASHING_APP_NO_SUCH_VARIABLE"]
      print(missing!)
    case "abort": abort()
    case "segv": badPointer()
    case "bus": pastTheEnd()
    case "fpe": print(div(1, Int32(CommandLine.arguments.count) - 2))
    case "exception":
      let session = URLSession(configuration: .default)
      session.finishTasksAndInvalidate()
      session.dataTask(with: URL(fileURLWithPath: "/")).resume()
    case "thread":
      Thread {
        Thread.current.name = "downloader"
        badPointer()
      }.start()
      Thread.sleep(forTimeInterval: 60)
    case "forged-name", "forged-far": forgeThenCrash(farLast: how == "forged-far")
    default: print("no such crash: \(how)")
    }
  }

  /// Writes through a pointer to nothing.
  static func badPointer() {
    let pointer = UnsafeMutablePointer<Int>(bitPattern: 16)
    pointer?.pointee = 1
  }

  /// Reads a mapped page wholly past the end of the file it maps (the program's own).
  static func pastTheEnd() {
    let fd = open("/proc/self/exe", O_RDONLY)
    var status = stat()
    let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))
    guard fd >= 0, fstat(fd, &status) == 0 else { return print("could not open the program") }
    let end = (Int(status.st_size) + pageSize - 1) / pageSize * pageSize
    guard let mapped = mmap(nil, end + pageSize, PROT_READ, MAP_PRIVATE, fd, 0), mapped != MAP_FAILED else {
      return print("could not map the program")
    }
    print(mapped.load(fromByteOffset: end, as: UInt8.self))
  }

  /// Sends, as a hostile app could, crash records of its own on its events socket (descriptor 3)
  /// amid garbage: one naming a thread far out of range, one whose name would end the report's
  /// field and set another, one for another signal; then crashes by SIGSEGV past its crash handler,
  /// so that the newest record for the signal is a forged one (`farLast`: the far one).
  static func forgeThenCrash(farLast: Bool) {
    func record(signal: Int32, thread: Int32, name: String) -> [UInt8] {
      var bytes = Array("PFSCRASH".utf8)
      withUnsafeBytes(of: signal) { bytes += $0 }
      withUnsafeBytes(of: thread) { bytes += $0 }
      let name = Array(name.utf8.prefix(47))
      bytes.append(UInt8(name.count))
      return bytes + name + Array(repeating: 0, count: 47 - name.count)
    }
    let far = record(signal: SIGSEGV, thread: 1_000_000_000, name: "far")
    let hostile = record(signal: SIGSEGV, thread: 7, name: "\u{1b}]0;owned\u{7}\",\"terminationReason\":\"0x8badf00d")
    let forged =
      Array("garbage\n".utf8) + (farLast ? hostile + far : far + hostile)
      + record(signal: SIGABRT, thread: 9, name: "other signal") + Array("PFSCRASH cut short".utf8)
    let sent = forged.withUnsafeBytes { send(3, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
    print("forged \(sent) bytes")
    signal(SIGSEGV, SIG_DFL)
    badPointer()
  }
}

UIApplication.main(delegate: AppDelegate())
