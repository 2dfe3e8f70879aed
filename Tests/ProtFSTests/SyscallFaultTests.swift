import Foundation
import ProtFSTestSupport
import Synchronization
import Testing

@testable import ProtFS
@testable import ProtFSLock
@testable import ProtFSSystem

/// The syscall layer's error paths, reached through debug builds' error injection (`SyscallFaults`).
@Suite struct SyscallFaultTests {
  /// The device's `.protfs/` directory.
  private func stateDirectory(_ t: TestDevice) throws -> DirectoryHandle {
    try t.device.openDirectory(DevicePath(validated: [Device.stateDirectoryName]))
  }

  /// The names in `directory`, hidden ones included.
  private func names(_ directory: DirectoryHandle) throws -> Set<String> {
    Set(try directory.entries().map(\.name))
  }

  @Test func enospcWhileAnAtomicWriteWritesLeavesTheOldFileAndNoTempFile() throws {
    let t = try TestDevice()
    let directory = try stateDirectory(t)
    try AtomicFile.write(Array("old".utf8), named: "note", in: directory)
    let before = try names(directory)
    let faults = SyscallFaults()
    faults.fail(.write, with: ENOSPC)
    let error = #expect(throws: ProtFSError.self) {
      try faults.during { () throws(ProtFSError) in
        try AtomicFile.write(Array("new".utf8), named: "note", in: directory)
      }
    }
    #expect(faults.injectedCount(.write) == 1)
    #expect(error?.errno == ENOSPC)
    #expect(try AtomicFile.read(named: "note", in: directory) == Array("old".utf8))
    #expect(try names(directory) == before)
  }

  @Test func aWriteThatMayNotReplaceLeavesAnExistingFileAndNoTempFile() throws {
    let t = try TestDevice()
    let directory = try stateDirectory(t)
    let options = AtomicFile.Options(replacing: false)
    #expect(try AtomicFile.write(Array("first".utf8), named: "note", in: directory, options: options))
    let before = try names(directory)
    #expect(try !AtomicFile.write(Array("second".utf8), named: "note", in: directory, options: options))
    #expect(try AtomicFile.read(named: "note", in: directory) == Array("first".utf8))
    #expect(try names(directory) == before)
  }

  @Test func enospcWhileTheLockStateIsWrittenKeepsTheOldStateAndNoTempFile() throws {
    let t = try TestDevice()
    let store = try LockStore(t.device)
    var record = LockRecord.initial(at: Date(timeIntervalSince1970: 1_800_000_000))
    try store.write(record)
    let before = try names(store.directory)
    record.state = .locked
    record.generation += 1
    for call in [Syscall.write, .fdatasync, .rename] {
      let faults = SyscallFaults()
      faults.fail(call, with: ENOSPC)
      let error = #expect(throws: ProtFSError.self) {
        try faults.during { () throws(ProtFSError) in try store.write(record) }
      }
      #expect(faults.injectedCount(call) == 1, "\(call)")
      #expect(error?.errno == ENOSPC, "\(call)")
      #expect(try store.record(now: Date()).state == .unlocked, "\(call)")
      #expect(try names(store.directory) == before, "\(call)")
    }
    try store.write(record)
    #expect(try store.record(now: Date()) == record)
  }

  @Test func enospcWhileTheModeKeyIsWrittenLeavesNoKeyAndNoTempFile() throws {
    let t = try TestDevice()
    let directory = try stateDirectory(t)
    let before = try names(directory)
    let faults = SyscallFaults()
    faults.fail(.write, with: ENOSPC)
    let error = #expect(throws: ProtFSError.self) {
      try faults.during { () throws(ProtFSError) in _ = try ModeKey.loadOrCreate(in: directory) }
    }
    #expect(faults.injectedCount(.write) == 1 && error?.errno == ENOSPC)
    #expect(try names(directory) == before && !before.contains(ModeKey.fileName))
    _ = try ModeKey.loadOrCreate(in: directory)
    #expect(try names(directory) == before.union([ModeKey.fileName]))
  }

  @Test func eioWhileReadingIsOneErrorNamingThePath() throws {
    let t = try TestDevice()
    let store = try LockStore(t.device)
    try store.write(LockRecord.initial(at: Date()))
    let faults = SyscallFaults()
    faults.fail(.read, with: EIO)
    let error = #expect(throws: ProtFSError.self) {
      try faults.during { () throws(ProtFSError) in _ = try store.record(now: Date()) }
    }
    let path = store.directory.pathOf(LockStore.stateFileName)
    #expect(faults.injectedCount(.read) == 1)
    #expect(error?.code == .io && error?.errno == EIO && error?.path == path)
    #expect(error?.message.contains(path) == true)
    #expect(error?.message.contains(String(cString: strerror(EIO))) == true)
  }

  @Test func eintrIsRetried() throws {
    let t = try TestDevice()
    let directory = try stateDirectory(t)
    let faults = SyscallFaults()
    faults.fail(.write, with: EINTR, times: 3)
    faults.fail(.fsync, with: EINTR, times: 2)
    faults.fail(.rename, with: EINTR)
    faults.fail(.read, with: EINTR, times: 2)
    let read = try faults.during { () throws(ProtFSError) in
      try AtomicFile.write(Array("after interruptions".utf8), named: "note", in: directory)
      return try AtomicFile.read(named: "note", in: directory)
    }
    #expect(read == Array("after interruptions".utf8))
    for (call, count) in [(Syscall.write, 3), (.fsync, 2), (.rename, 1), (.read, 2)] {
      #expect(faults.injectedCount(call) == count && faults.remaining(call) == 0, "\(call)")
    }
  }

  @Test func faultsStayOnTheThreadThatInstalledThemUnlessHandedOn() throws {
    let t = try TestDevice()
    let path = t.path(Device.stateDirectoryName)
    let faults = SyscallFaults()
    faults.fail(.write, with: EIO)
    let outcomes = faults.during { () -> [Bool] in
      let handedOn = SyscallFaults.current
      return [false, true].map { propagate in
        let failed = Mutex(false)
        onAnotherThread {
          let write = { () throws(ProtFSError) in
            try AtomicFile.write(Array("x".utf8), named: "note-\(propagate)", in: DirectoryHandle(path: path))
          }
          do {
            if propagate, let handedOn { _ = try handedOn.during(write) } else { _ = try write() }
          } catch {
            failed.withLock { $0 = true }
          }
        }
        return failed.withLock { $0 }
      }
    }
    #expect(outcomes == [false, true])
    #expect(faults.remaining(.write) == 0)
  }

  /// Runs `body` on a thread of its own and waits for it to end.
  private func onAnotherThread(_ body: @escaping @Sendable () -> Void) {
    let done = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
      body()
      done.signal()
    }
    done.wait()
  }

  @Test func confinementNamesTheDirectoryTheAppUserCannotSearchAndItsErrno() throws {
    let t = try TestDevice()
    var plan = Confinement.Plan(device: t.device)
    plan.reachable = ["/", t.device.root]
    let error = Confinement.failure(
      ConfinedLaunch.Failure(step: .reach, errno: EACCES, detail: 1), plan: plan, device: t.device)
    #expect(error.errno == EACCES && error.path == t.device.root)
    #expect(error.message.contains(String(cString: strerror(EACCES))), "\(error.message)")
    #expect(error.message.contains("may not enter '\(t.device.root)' (mode 0"), "\(error.message)")
  }
}
