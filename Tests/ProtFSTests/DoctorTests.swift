import Foundation
import ProtFS
import ProtFSDoctor
import ProtFSTestSupport
import Testing

/// `Doctor`'s checks, each given the machine it reads (issue 64).
@Suite struct DoctorTests {
  @Test func aDeviceBelowADirectoryClosedToTheAppUserIsAnErrorNamingIt() throws {
    let directory = try TestDevice.makeTemporaryDirectory(prefix: "protfs-doctor")
    defer { TestDevice.removeTree(directory) }
    chmod(directory, 0o755)
    let closed = directory + "/closed"
    mkdir(closed, 0o700)
    mkdir(closed + "/device", 0o755)
    let user = AppUser(uid: 501, gid: 501)
    let check = Doctor.deviceAccess(closed + "/device", user: user)
    #expect(check.level == .error && check.detail.contains("'\(closed)'"), "\(check)")
    #expect(check.fix?.contains("chmod o+x '\(closed)'") == true, "\(check)")
    chmod(closed, 0o711)
    #expect(Doctor.deviceAccess(closed + "/device", user: user).level == .ok)
    // Its owner gets through a directory closed to everyone else.
    chmod(closed, 0o700)
    chown(closed, 501, 501)
    #expect(Doctor.deviceAccess(closed + "/device", user: user).level == .ok)
  }

  @Test func pathDirectoriesClosedToTheAppUserAreAWarningNamingThem() throws {
    let directory = try TestDevice.makeTemporaryDirectory(prefix: "protfs-doctor")
    defer { TestDevice.removeTree(directory) }
    chmod(directory, 0o755)
    mkdir(directory + "/closed", 0o700)
    mkdir(directory + "/open", 0o755)
    let check = Doctor.pathAccess("\(directory)/closed:\(directory)/open:/usr/bin", user: AppUser(uid: 501, gid: 501))
    #expect(check.level == .warning && check.detail.contains("'\(directory)/closed'"), "\(check)")
    #expect(!check.detail.contains("\(directory)/open"), "\(check)")
    #expect(Doctor.pathAccess("\(directory)/open:/usr/bin", user: AppUser(uid: 501, gid: 501)).level == .ok)
  }

  static let settings: [(String?, DoctorCheck.Level)] = [("0", .ok), ("1\n", .warning), (nil, .warning)]

  @Test(arguments: settings)
  func tiocsti(_ setting: String?, _ level: DoctorCheck.Level) {
    let check = Doctor.tiocsti(setting: setting)
    #expect(check.level == level, "\(check)")
    #expect((check.fix == nil) == (level == .ok))
  }

  @Test func aMissingKernelCallIsAWarningNamingIt() {
    #expect(Doctor.kernelCalls(getxattrat: true, fchmodat2: true, openat2: true).level == .ok)
    let check = Doctor.kernelCalls(getxattrat: false, fchmodat2: true, openat2: true)
    #expect(check.level == .warning && check.detail.contains("getxattrat") && !check.detail.contains("openat2 ("))
  }

  @Test func fuseWithoutItsDeviceOrHelperIsAWarning() {
    let missing = Doctor.fuse(device: "/nonexistent/fuse")
    #expect(missing.level == .warning && missing.detail.contains("'/nonexistent/fuse'"), "\(missing)")
    let noHelper = Doctor.fuse(device: "/dev/null", helpers: ["/nonexistent/fusermount3"])
    #expect(noHelper.level == .warning && noHelper.detail.contains("fusermount3"), "\(noHelper)")
  }

  @Test func noCgroupIsAWarningAndAWritableOneIsTriedByAChild() throws {
    #expect(Doctor.cgroupFreezer(in: nil).level == .warning)
    // A plain directory is no cgroup: what is made in it has no cgroup.freeze.
    let directory = try TestDevice.makeTemporaryDirectory(prefix: "protfs-doctor")
    defer { TestDevice.removeTree(directory) }
    let check = Doctor.cgroupFreezer(in: directory)
    #expect(check.level == .warning && check.detail.contains("cgroup.freeze"), "\(check)")
    #expect(try FileManager.default.contentsOfDirectory(atPath: directory) == [])
  }

  @Test func extendedAttributesAreTriedWhereTheDeviceWouldBe() throws {
    let directory = try TestDevice.makeTemporaryDirectory(prefix: "protfs-doctor")
    defer { TestDevice.removeTree(directory) }
    let check = Doctor.extendedAttributes(near: directory + "/not/yet/a/device")
    #expect(check.level == .ok && check.detail.contains("'\(directory)'"), "\(check)")
  }
}
