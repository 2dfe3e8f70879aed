import Foundation
import ProtFS
import ProtFSAudit
import ProtFSSystem
import ProtFSTestSupport
import Testing

/// The audit predicts the class of the directories the system makes later (nsurlsessiond's
/// Downloads directory, tmp, Library/Caches) and reports the locked-download failure before the
/// first download meets it.
@Suite("Audit predictions of system directories")
struct AuditPredictionTests {
  let app = "com.example.app"
  let downloads = "Library/Caches/com.apple.nsurlsessiond/Downloads/com.example.app"

  /// A device whose one container has `defaultClass`.
  func device(_ scratch: AuditScratch, defaultClass: ProtectionClass) throws -> Device {
    let device = try scratch.device(containers: [])
    try device.createContainer(try BundleID(app), defaultClass: defaultClass)
    return device
  }

  @Test func aCompleteContainerWithoutItsDownloadsDirectoryIsAnError() throws {
    let scratch = AuditScratch()
    defer { withExtendedLifetime(scratch) {} }
    let device = try device(scratch, defaultClass: .complete)
    let result = try runAudit(device.root)
    #expect(result.significant == ["PFS014 \(downloads)"])
    let finding = try #require(result.findings.first { $0.ruleID == "PFS014" })
    #expect(finding.level == .error)
    #expect(finding.actual == "complete (predicted)")
    #expect(finding.message.contains("EPERM"), "\(finding.message)")
    #expect(finding.message.contains("protfs init-cache com.example.app"), "\(finding.message)")
    #expect(result.summary?.findings[.error] == 1)

    // The fix makes it clean.
    _ = try device.initCache(try BundleID(app))
    #expect(try runAudit(device.root).significant.isEmpty)
  }

  @Test func theDefaultClassPredictsNothing() throws {
    let scratch = AuditScratch()
    defer { withExtendedLifetime(scratch) {} }
    let device = try device(scratch, defaultClass: .completeUntilFirstUserAuthentication)
    #expect(try runAudit(device.root).significant.isEmpty)
  }

  @Test func theClassComesFromTheNearestAncestorThatHasOne() throws {
    let scratch = AuditScratch()
    defer { withExtendedLifetime(scratch) {} }
    let device = try device(scratch, defaultClass: .completeUntilFirstUserAuthentication)
    // Library/Caches made stronger than the default: the Downloads directory would inherit it.
    try device.setAttribute(
      device.containerPath(app, "Library/Caches"), AttributeName.protectionClass,
      ProtectionClass.completeUnlessOpen.rawValue)
    let result = try runAudit(device.root)
    #expect(result.paths("PFS014") == [downloads])
    let finding = try #require(result.findings.first { $0.ruleID == "PFS014" })
    #expect(finding.message.contains("(from Library/Caches)"), "\(finding.message)")
    #expect(finding.actual == "unless-open (predicted)")

    // An existing Downloads directory of class none hands none down: nothing to predict.
    try device.makeDirectory(app, "Library/Caches/com.apple.nsurlsessiond/Downloads", class: ProtectionClass.none)
    #expect(try runAudit(device.root).paths("PFS014").isEmpty)
  }

  @Test func aMissingTmpOfACompleteContainerIsAWarning() throws {
    let scratch = AuditScratch()
    defer { withExtendedLifetime(scratch) {} }
    let device = try device(scratch, defaultClass: .complete)
    _ = try device.initCache(try BundleID(app))
    #expect(rmdir(device.containerPath(app, "tmp")) == 0)
    let result = try runAudit(device.root)
    #expect(result.significant == ["PFS015 tmp"])
    let finding = try #require(result.findings.first { $0.ruleID == "PFS015" })
    #expect(finding.level == .warning)
    #expect(finding.message.contains("(from the container's default class)"), "\(finding.message)")
  }

  @Test func aLinkInTheChainIsNeitherFollowedNorPredicted() throws {
    let scratch = AuditScratch()
    defer { withExtendedLifetime(scratch) {} }
    let device = try device(scratch, defaultClass: .complete)
    // Outside the container, a directory of class none the link would lead to.
    let outside = scratch.path + "/outside"
    try FileManager.default.createDirectory(atPath: outside + "/Downloads", withIntermediateDirectories: true)
    try device.setAttribute(outside, AttributeName.protectionClass, ProtectionClass.none.rawValue)
    #expect(symlink(outside, device.containerPath(app, "Library/Caches/com.apple.nsurlsessiond")) == 0)
    let result = try runAudit(device.root)
    #expect(result.paths("PFS014").isEmpty, "\(result.significant)")
    #expect(result.paths("PFS004") == ["Library/Caches/com.apple.nsurlsessiond"])
  }
}
