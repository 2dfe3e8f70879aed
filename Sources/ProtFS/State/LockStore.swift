import Foundation
import ProtFSSystem

/// The lock simulator's files under `<device>/.protfs/`, as any target reads them: the state
/// record, and whether a transition journal is there.
///
/// Only ProtFSLock changes them: it writes the record and the journal, and holds the `flock`
/// that serializes transitions between protfs processes (its `LockStore` extension).
package struct LockStore {
  package static let stateFileName = "lock-state.json"
  package static let journalFileName = "transition.json"

  package let device: Device
  package let directory: DirectoryHandle

  /// Opens the state directory of an initialised device.
  package init(_ device: Device) throws(ProtFSError) {
    try device.requireInitialized()
    self.device = device
    directory = try device.openDirectory(DevicePath(validated: [Device.stateDirectoryName]))
  }

  /// The stored record, or the new-device record when none was written yet: unlocked since the
  /// device was initialised (its marker's time, which `init` writes once), or since `now` when
  /// that cannot be read.
  package func record(now: Date) throws(ProtFSError) -> LockRecord {
    let remedy = Remedy.advice("restore it from a backup, or remove it to start over as a new, unlocked device")
    guard let record: LockRecord = try read(Self.stateFileName, remedy: remedy) else {
      let initialised = (try? directory.status(Device.markerName))?.modified
      return .initial(at: min(initialised ?? now, now))
    }
    return record
  }

  /// Whether a journal exists: one `fstatat`, what every command pays when nothing was interrupted.
  package static func hasJournal(_ device: Device) -> Bool {
    var s = stat()
    return (try? Kernel.stat(device.stateDirectory + "/" + journalFileName, &s).get()) != nil
  }

  /// The file `name` decoded (`JSONStateFile`); nil when there is none. `remedy` says what to do
  /// about a file that does not decode.
  package func read<T: Decodable>(_ name: String, remedy: Remedy) throws(ProtFSError) -> T? {
    try JSONStateFile.read(
      T.self, named: name, in: directory, limit: 64 << 10, what: "lock simulator's file", remedy: remedy)
  }
}
