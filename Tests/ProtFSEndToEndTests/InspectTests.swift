import Foundation
import ProtFS
import ProtFSTestSupport
import Testing

/// `protfs inspect APP`, `init --from-app APP` and `app install --from-app APP`, run as a user
/// runs them, on .ipa files and .app directories made from Apple's formats.
@Suite struct InspectTests {
  typealias B = AppPackageBuilder
  static let bundle = "com.example.inspected"

  /// An .ipa of an app asking for `defaultClass`, with `modes`, in `directory`.
  func ipa(in directory: String, defaultClass: String? = "NSFileProtectionComplete", modes: [String]? = ["fetch"])
    throws -> String
  {
    let path = directory + "/Inspected.ipa"
    let signature = B.signature(identifier: Self.bundle, entitlements: B.entitlements(defaultClass: defaultClass))
    try B.ipa(
      at: path,
      [
        B.Member(
          "Payload/Inspected.app/Info.plist", B.infoPlist(bundleID: Self.bundle, executable: "Inspected", modes: modes)),
        B.Member(
          "Payload/Inspected.app/Inspected",
          B.fat([
            (B.arm, 9, B.thin(cpuType: B.arm, subtype: 9, is64: false, signature: signature)),
            (B.arm64, 0, B.thin(signature: signature)),
          ])),
      ])
    return path
  }

  @Test func inspectPrintsWhatTheAppDeclaresAndWhatItImplies() async throws {
    let t = try TestDevice()
    let path = try ipa(in: t.directory)
    let text = try await Protfs.run(["--device", t.root, "inspect", path])
    #expect(text.status == 0, "\(text)")
    for line in [
      "Bundle id:", Self.bundle, "Inspected (armv7, arm64)", "Default class:", "complete", "Background modes:",
      "fetch", "com.apple.developer.default-data-protection = NSFileProtectionComplete", "warning:",
      "init-cache \(Self.bundle)",
    ] {
      #expect(text.stdout.contains(line), "\(line) missing from\n\(text)")
    }
    let json = try await Protfs.run(["--device", t.root, "inspect", "--json", path])
    #expect(json.status == 0, "\(json)")
    let object = try JSONSerialization.jsonObject(with: json.stdoutBytes) as? [String: Any] ?? [:]
    #expect(object["bundleID"] as? String == Self.bundle)
    #expect(object["defaultClassName"] as? String == "complete")
    #expect(object["defaultClassRawValue"] as? String == "NSFileProtectionComplete")
    #expect(object["defaultClassDeclared"] as? Bool == true)
    #expect(object["backgroundModes"] as? [String] == ["fetch"])
    #expect(object["permittedTaskIdentifiers"] as? [String] == [])
    let entitlements = object["entitlements"] as? [String: Any]
    #expect(entitlements?["com.apple.developer.default-data-protection"] as? String == "NSFileProtectionComplete")
    let architectures = (object["architectures"] as? [[String: Any]])?.compactMap { $0["name"] as? String }
    #expect(architectures == ["armv7", "arm64"])
    let kinds = (object["implications"] as? [[String: Any]])?.compactMap { $0["kind"] as? String }
    #expect(kinds == ["downloadsNeedClassNone", "lockedDownloadsFail", "taskIdentifiersMissing"])
    // Nothing was written: the device holds what it held.
    #expect(!FileManager.default.fileExists(atPath: t.containerPath(Self.bundle)))
  }

  @Test func aHostileAppGivesOneErrorNamingTheFile() async throws {
    let t = try TestDevice()
    let path = t.directory + "/Evil.ipa"
    try B.ipa(at: path, [B.Member("Payload/Evil.app/../../escape", [1])])
    let result = try await Protfs.run(["--device", t.root, "inspect", path])
    #expect(result.status == 1, "\(result)")
    #expect(result.stdout.isEmpty)
    let lines = result.stderr.split(separator: "\n")
    #expect(lines.count == 1 && lines[0].hasPrefix("Error: Cannot read the app '\(path)'"), "\(result)")
    #expect(result.stderr.contains("outside the archive"), "\(result)")
  }

  @Test func initFromAppMakesTheContainerWithTheAppsDefaultClass() async throws {
    let t = try TestDevice()
    let path = try ipa(in: t.directory)
    let made = try await Protfs.run(["--device", t.root, "init", "--from-app", path, "--json"])
    #expect(made.status == 0, "\(made)")
    let object = try JSONSerialization.jsonObject(with: made.stdoutBytes) as? [String: Any] ?? [:]
    #expect(object["bundleID"] as? String == Self.bundle)
    #expect(object["className"] as? String == "complete")
    #expect(FileManager.default.fileExists(atPath: t.containerPath(Self.bundle, "Documents")))
    // A bundle id that is not the app's is a usage error; the same one is taken.
    let other = try await Protfs.run(["--device", t.root, "init", "com.example.other", "--from-app", path])
    #expect(other.status == 64 && other.stderr.contains("is not the app's"), "\(other)")
    let same = try await Protfs.run(["--device", t.root, "init", Self.bundle, "--from-app", path])
    #expect(same.status == 0, "\(same)")
    let both = try await Protfs.run(["--device", t.root, "init", "--from-app", path, "--default-class", "none"])
    #expect(both.status == 64, "\(both)")
    // Without the entitlement, the container gets iOS's default, and says so.
    let plain = try TestDevice()
    let undeclared = try ipa(in: plain.directory, defaultClass: nil)
    let noted = try await Protfs.run(["--device", plain.root, "init", "--from-app", undeclared])
    #expect(noted.status == 0 && noted.stderr.contains("do not set com.apple.developer.default-data-protection"))
    #expect(noted.stderr.contains("complete-until-first-user-authentication"), "\(noted)")
  }

  @Test func appInstallFromAppInstallsTheAppsInfoPlist() async throws {
    let t = try TestDevice()
    let path = try ipa(in: t.directory, modes: ["fetch", "processing"])
    let made = try await Protfs.run(["--device", t.root, "init", "--from-app", path])
    #expect(made.status == 0, "\(made)")
    let script = t.directory + "/app.sh"
    try "#!/bin/sh\nexit 0\n".write(toFile: script, atomically: true, encoding: .utf8)
    chmod(script, 0o755)
    let installed = try await Protfs.run(["--device", t.root, "app", "install", "--from-app", path, "--", script])
    #expect(installed.status == 0 && installed.stdout.contains("Installed \(Self.bundle)"), "\(installed)")
    let plist = t.root + "/Bundles/\(Self.bundle).app/Info.plist"
    let data = try Data(contentsOf: URL(fileURLWithPath: plist))
    let info = try PropertyListSerialization.propertyList(from: data, format: nil) as? [String: Any] ?? [:]
    #expect(info["CFBundleIdentifier"] as? String == Self.bundle)
    #expect(info["UIBackgroundModes"] as? [String] == ["fetch", "processing"])
    #expect(info["MinimumOSVersion"] as? String == "15.0")
    let conflicting = try await Protfs.run([
      "--device", t.root, "app", "install", "--from-app", path, "--info-plist", plist, "--", script,
    ])
    #expect(conflicting.status == 64, "\(conflicting)")
  }

  /// The rule ids and paths of an audit's JSON findings.
  static func findings(_ result: RunResult) throws -> [String] {
    let object = try JSONSerialization.jsonObject(with: result.stdoutBytes) as? [String: Any] ?? [:]
    return (object["findings"] as? [[String: Any]] ?? []).compactMap { finding in
      guard let id = finding["ruleId"] as? String, let path = finding["path"] as? String else { return nil }
      return "\(id) \(path)"
    }.sorted()
  }

  /// `audit --app`: the app's container on the device, checked against what the app declares (a
  /// complete default, a background fetch, processing without identifiers), until the fixes.
  @Test func auditAppChecksTheAppsContainerAgainstItsDeclarations() async throws {
    let t = try TestDevice()
    let path = try ipa(in: t.directory, modes: ["fetch", "processing"])
    #expect(try await Protfs.run(["--device", t.root, "init", Self.bundle]).status == 0)
    #expect(try await Protfs.run(["--device", t.root, "init", "com.example.other"]).status == 0)
    let downloads = "Library/Caches/com.apple.nsurlsessiond/Downloads/\(Self.bundle)"
    let audit = try await Protfs.run(["--device", t.root, "audit", "--app", path, "--format", "json"])
    #expect(audit.status == 0, "\(audit)")
    // The app's container alone; its default is not the app's, its Downloads directory will not be
    // class none, and its processing mode has no identifiers.
    #expect(try Self.findings(audit) == ["PFS007 .", "PFS016 \(downloads)", "PFS017 ."], "\(audit.stdout)")
    let text = try await Protfs.run(["--device", t.root, "audit", "--app", path, "--fail-on", "warning"])
    #expect(text.status == 1, "\(text)")
    #expect(text.stdout.contains("downloads in the background (UIBackgroundModes: fetch, processing)"), "\(text)")
    #expect(text.stdout.contains("protfs init-cache \(Self.bundle)"), "\(text)")
    #expect(text.stdout.contains("BGTaskSchedulerPermittedIdentifiers"), "\(text)")

    // The fixes the findings name: the app's default class, its Downloads directory of class none.
    #expect(try await Protfs.run(["--device", t.root, "init", "--from-app", path]).status == 0)
    #expect(try await Protfs.run(["--device", t.root, "init-cache", Self.bundle]).status == 0)
    let fixed = try await Protfs.run(["--device", t.root, "audit", "--app", path, "--format", "json"])
    #expect(try Self.findings(fixed) == ["PFS017 ."], "\(fixed.stdout)")
  }

  @Test func auditAppRefusesWhatItCannotCheck() async throws {
    let t = try TestDevice()
    let path = try ipa(in: t.directory)
    // No container yet: exit 2, naming the app's bundle id.
    let missing = try await Protfs.run(["--device", t.root, "audit", "--app", path])
    #expect(missing.status == 2, "\(missing)")
    #expect(missing.stderr.contains(Self.bundle), "\(missing)")
    #expect(try await Protfs.run(["--device", t.root, "init", Self.bundle]).status == 0)
    let other = try await Protfs.run(["--device", t.root, "audit", "--app", path, "--bundle", "com.example.other"])
    #expect(other.status == 64, "\(other)")
    #expect(other.stderr.contains("is not the app's"), "\(other)")
    let plist = t.directory + "/App.entitlements"
    try Data(B.entitlements(defaultClass: "NSFileProtectionNone").utf8).write(to: URL(fileURLWithPath: plist))
    let both = try await Protfs.run(["--device", t.root, "audit", "--app", path, "--entitlements", plist])
    #expect(both.status == 64, "\(both)")
    // PATHs that hold no container of the app: the default class alone is compared, and said so.
    #expect(try await Protfs.run(["--device", t.root, "init", "com.example.other"]).status == 0)
    let elsewhere = try await Protfs.run([
      "--device", t.root, "audit", "--app", path, "--format", "json", t.root + "/Containers/com.example.other",
    ])
    #expect(elsewhere.status == 0, "\(elsewhere)")
    #expect(elsewhere.stderr.contains("note: no container audited is \(Self.bundle)'s"), "\(elsewhere)")
    #expect(try Self.findings(elsewhere) == ["PFS007 ."], "\(elsewhere.stdout)")
    let garbage = t.directory + "/garbage.ipa"
    try Data("not an app".utf8).write(to: URL(fileURLWithPath: garbage))
    let hostile = try await Protfs.run(["--device", t.root, "audit", "--app", garbage])
    #expect(hostile.status == 2, "\(hostile)")
    #expect(hostile.stderr.contains(garbage), "\(hostile)")
  }
}
