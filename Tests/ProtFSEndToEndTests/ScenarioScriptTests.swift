import Foundation
import ProtFSTestSupport
import Testing

/// `scripts/scenario.sh`, whose output the README shows: the demo's story told in detail (all that
/// the apps print) runs end to end with this build, and says what the README says it says.
/// DemoScriptTests checks the story step by step, and what it leaves behind.
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
    #expect(output.contains(#""terminationReason" : "0x8badf00d""#), "\(output)")
    #expect(output.contains("time remaining 2"), "\(output)")
    #expect(output.contains("tick 1\n"), "\(output)")
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
    #expect(output.contains(#""event":"didSendBodyData""#), "\(output)")
    #expect(output.contains("\ndemo: done in "), "\(output)")
  }
}
