import Foundation
import ProtFSTestSupport
import Testing

/// `protfs doctor` on this machine (issue 64).
@Suite struct DoctorEndToEndTests {
  static let names = ["fuse", "xattr", "cgroup-freezer", "device-access", "path-access", "tiocsti", "kernel-calls"]

  @Test func everyCheckIsReportedAndTheJSONParses() async throws {
    let t = try TestDevice(containers: ["com.example.app"])
    let json = try await Protfs.run(["--device", t.root, "doctor", "--json"])
    let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
    let checks = try #require(object["checks"] as? [[String: Any]])
    #expect(checks.compactMap { $0["name"] as? String } == Self.names, "\(json)")
    for check in checks {
      #expect(["ok", "warning", "error"].contains(check["level"] as? String ?? ""), "\(check)")
      #expect((check["detail"] as? String)?.isEmpty == false, "\(check)")
    }
    let errors = checks.filter { $0["level"] as? String == "error" }.count
    #expect(object["errors"] as? Int == errors)
    #expect(json.status == (errors > 0 ? 1 : 0), "\(json)")
    // The device is one the app user reaches, on a file system with xattrs.
    for name in ["xattr", "device-access"] {
      #expect(checks.first { $0["name"] as? String == name }?["level"] as? String == "ok", "\(json)")
    }
    let text = try await Protfs.run(["--device", t.root, "doctor"])
    let lines = text.stdout.split(separator: "\n")
    #expect(lines.count == Self.names.count + 1, "\(text)")
    #expect(lines.dropLast().allSatisfy { $0.hasPrefix("ok ") || $0.hasPrefix("warning ") || $0.hasPrefix("error ") })
    #expect(text.status == json.status)
  }

  @Test func aDeviceTheAppUserCannotReachIsAnErrorNamingTheDirectory() async throws {
    let directory = try TestDevice.makeTemporaryDirectory(prefix: "protfs-doctor")
    defer { TestDevice.removeTree(directory) }
    chmod(directory, 0o700)
    let result = try await Protfs.run(["--device", directory + "/device", "doctor"])
    #expect(result.status == 1, "\(result)")
    #expect(
      result.stdout.contains("error    App user's access to the device: uid 501 cannot search '\(directory)'"),
      "\(result)")
  }
}
