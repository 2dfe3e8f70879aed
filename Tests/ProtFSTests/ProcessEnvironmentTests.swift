import Foundation
import Testing

@testable import ProtFSSystem

/// `ProcessEnvironment`, the environment read from `environ` without Foundation's process info.
@Suite struct ProcessEnvironmentTests {
  @Test func itIsFoundationsEnvironmentAndGetenvsValues() {
    #expect(ProcessEnvironment.all() == ProcessInfo.processInfo.environment)
    #expect(ProcessEnvironment.value("PATH") == ProcessInfo.processInfo.environment["PATH"])
    #expect(ProcessEnvironment.value("PROTFS_SURELY_UNSET_\(getpid())") == nil)
  }
}
