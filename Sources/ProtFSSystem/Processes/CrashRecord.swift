import CProtFSSys
import Foundation

/// What a ProtFSKit app's crash handler sends its supervisor as it crashes (`protfs_crash_record`,
/// 64 bytes): the signal and the thread that took it, by number and name. It comes from the app,
/// so it is a claim: the supervisor believes a record only for the signal the app died of, and
/// bounds and escapes what it keeps of it.
package struct CrashRecord: Equatable, Sendable {
  /// The signal.
  package var signal: Int32
  /// The thread: 0 for the main thread, the others from 1; -1 when the app could not tell.
  package var thread: Int32
  /// The thread's name, as sent (at most 47 bytes of UTF-8, perhaps not).
  package var name: [UInt8]

  /// The size of one record.
  package static let size = MemoryLayout<protfs_crash_record>.size
  private static let magic = Array(PROTFS_CRASH_MAGIC.utf8)
  private static let nameCapacity = MemoryLayout.size(ofValue: protfs_crash_record().name)

  /// A record (tests forge them as an app could).
  package init(signal: Int32, thread: Int32, name: [UInt8]) {
    self.signal = signal
    self.thread = thread
    self.name = name
  }

  /// The record's bytes, as the crash handler sends them; a name longer than a record holds is cut.
  package var bytes: [UInt8] {
    var record = protfs_crash_record()
    record.signal = signal
    record.thread = thread
    let kept = Array(name.prefix(Self.nameCapacity))
    record.name_length = UInt8(kept.count)
    withUnsafeMutableBytes(of: &record.magic) { $0.copyBytes(from: Self.magic) }
    withUnsafeMutableBytes(of: &record.name) { $0.copyBytes(from: kept) }
    return withUnsafeBytes(of: &record) { Array($0) }
  }

  /// The well-formed records in `bytes`, in the order they begin: one begins at each magic,
  /// wherever it is (the app may have written anything around its records), and names no more
  /// than its name holds.
  package static func records(in bytes: [UInt8]) -> [CrashRecord] {
    var found: [CrashRecord] = []
    var start = 0
    while start + size <= bytes.count {
      defer { start += 1 }
      guard bytes[start..<start + magic.count].elementsEqual(magic) else { continue }
      var record = protfs_crash_record()
      withUnsafeMutableBytes(of: &record) { $0.copyBytes(from: bytes[start..<start + size]) }
      let length = Int(record.name_length)
      guard length <= nameCapacity else { continue }
      let name = withUnsafeBytes(of: &record.name) { Array($0.prefix(length)) }
      found.append(CrashRecord(signal: record.signal, thread: record.thread, name: name))
    }
    return found
  }

  /// Installs the crash handler of this process: from now on a crash by SIGILL, SIGTRAP, SIGABRT,
  /// SIGSEGV, SIGBUS or SIGFPE sends its record on `socket` (without blocking), then ends the
  /// process with the signal as before (through the handler installed before, if any). Once per
  /// process; later calls do nothing.
  package static func installHandler(sendingOn socket: Int32) -> Result<Void, Errno> {
    valueOrErrno(.sigaction) { protfs_crash_handler_install(socket) }.map { _ in () }
  }
}
