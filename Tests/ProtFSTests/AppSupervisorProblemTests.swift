import Foundation
import ProtFS
import ProtFSApp
import ProtFSSystem
import ProtFSTestSupport
import Synchronization
import Testing

/// What the supervisor cannot write but carries on without is reported (`onProblem`), never dropped.
@Suite struct AppSupervisorProblemTests {
  @Test func aRecordTheSupervisorCannotWriteIsReported() throws {
    let t = try TestDevice()
    let bundleID = try BundleID("com.example.unrecorded")
    let supervisor = try AppSupervisor(
      device: t.device, bundleID: bundleID, timings: AppTimings(), command: ["/bin/true"], appUsers: [])
    let problems = Mutex<[String]>([])
    supervisor.onProblem = { problem in problems.withLock { $0.append(problem) } }
    try supervisor.prepare()
    // A file in the way of the records' directory: the record's next write fails.
    let records = t.device.stateDirectory + "/" + AppStore.directoryName
    try FileManager.default.moveItem(atPath: records, toPath: records + ".moved")
    #expect(FileManager.default.createFile(atPath: records, contents: Data()))
    supervisor.abandon()
    let reported = problems.withLock { $0 }
    #expect(reported.count == 1)
    #expect(reported.first?.hasPrefix("the record of com.example.unrecorded could not be written: ") == true)
  }
}
