import Foundation
import ProtFSTestSupport
import Testing

/// `scripts/scenario.sh`, whose story the README tells: the source documents' whole scenario
/// runs end to end with this build, and says what the README says it says.
@Suite(.timeLimit(.minutes(3))) struct ScenarioScriptTests {
  @Test func theWholeScenarioRunsAsTheReadmeShowsIt() async throws {
    let root = RepositoryLayout.packageRoot
    let build = URL(fileURLWithPath: Protfs.binary).deletingLastPathComponent().path
    let result = try await Protfs.runProgram(
      "/bin/bash", [root + "/scripts/scenario.sh"], environment: ["PROTFS_BUILD": build, "PROTFS_DEVICE": ""])
    let output = result.stdout
    #expect(result.status == 0, "\(result)")
    // 1. Background time running out, and a task ended in time while a timer logs the time left.
    #expect(output.contains("exit status 137 (killed by the system)"), "\(output)")
    #expect(output.contains(#""terminationReason":"0x8badf00d""#), "\(output)")
    #expect(output.contains("time remaining 2"), "\(output)")
    // 2. Operation not permitted while locked, without the fix.
    #expect(output.contains("Operation not permitted (the device locked during the download)"), "\(output)")
    // 3–4. With the fix, the suspended app is woken, moves the file, calls the handler.
    #expect(output.contains("NSFileProtectionNone  own"), "\(output)")
    #expect(output.contains(#""event":"urlSessionDidFinishEvents""#), "\(output)")
    #expect(output.contains("Documents\\/big.bin"), "\(output)")
    // 5. Relaunched after a kill, the app moved the file: 3 MiB in Documents.
    #expect(output.contains("3145728"), "\(output)")
    // 6. The upload's JSON reply.
    #expect(output.contains(#""event":"didReceive","json":true"#), "\(output)")
    #expect(output.hasSuffix("scenario: done\n"), "\(output)")
  }
}
