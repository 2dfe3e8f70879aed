import Foundation
import ProtFS
import ProtFSDownloads
import ProtFSSystem
import ProtFSTestSupport
import Testing

/// A body larger than the staging buffer has its temp file's blocks reserved ahead of its bytes
/// (`fallocate` with `FALLOC_FL_KEEP_SIZE`), and what it did not fill is given back.
@Suite("Downloads reserve their space ahead", .timeLimit(.minutes(1)))
struct DownloadsSpaceReservationTests {
  let fixture: DownloadFixture

  init() throws { fixture = try DownloadFixture() }

  /// The bytes of disk `path` holds (`st_blocks` counts 512-byte units), and its size.
  func allocation(_ path: String) throws -> (allocated: Int64, size: Int64) {
    var status = stat()
    try #require(lstat(path, &status) == 0, "cannot stat \(path)")
    return (Int64(status.st_blocks) * 512, Int64(status.st_size))
  }

  var temporaryFilePath: String {
    get throws { fixture.temporaryDirectory + "/" + (try #require(fixture.temporaryFiles.first)) }
  }

  /// Past 4 MiB of an 8 MiB body (and a staging buffer more): the reservations, each as far ahead
  /// as the bytes already written, have reached the announced length.
  static let pastHalf = (4 << 20) + (256 << 10)
  /// Past 1 MiB and a staging buffer: the file's blocks are reserved to 2 MiB.
  static let pastOne = (1 << 20) + (256 << 10)

  @Test func aLargeBodyHasItsBlocksReservedUpToItsAnnouncedLength() async throws {
    let body = DownloadFixture.bytes(8 << 20)
    let server = try FaultServer(body: body, mode: .gateAfter(bytes: Self.pastHalf))
    defer { server.stop() }
    let session = try DownloadSession(configuration: fixture.configuration())
    defer { session.invalidate() }
    let task = try session.downloadTask(with: server.url())
    task.resume()
    await session.waitForProgress(of: task, atLeast: Int64(Self.pastHalf))
    let during = try allocation(try temporaryFilePath)
    // Without the reservation only the bytes written so far would be allocated.
    #expect(during.allocated >= Int64(body.count), "\(during)")
    #expect(during.size <= Self.pastHalf)
    server.openGate()
    #expect(await task.waitUntilSettled() == .completed, "\(String(describing: task.error))")
    #expect(fixture.destinationContents("file.bin") == body)
    let placed = try allocation(fixture.destinationDirectory + "/file.bin")
    #expect(placed.size == Int64(body.count))
    #expect(placed.allocated <= Int64(body.count) + 64 * 1024, "nothing reserved beyond the announced length")
  }

  @Test func aServerAnnouncingMoreThanItSendsMakesNoMoreThanTwiceItsBytesReserved() async throws {
    // 32 MiB announced, 1.25 MiB sent: a reservation to the announced length would hold 32.
    let body = DownloadFixture.bytes(32 << 20)
    let server = try FaultServer(body: body, mode: .stallAfter(bytes: Self.pastOne))
    defer { server.stop() }
    let session = try DownloadSession(configuration: fixture.configuration())
    defer { session.invalidate() }
    let task = try session.downloadTask(with: server.url())
    task.resume()
    await session.waitForProgress(of: task, atLeast: Int64(Self.pastOne))
    let during = try allocation(try temporaryFilePath)
    #expect(during.allocated > during.size, "reserved ahead: \(during)")
    #expect(during.allocated <= 2 * Int64(Self.pastOne) + 64 * 1024, "\(during)")
    task.cancel()
    #expect(await task.waitUntilSettled() == .failed)
  }

  @Test func aFilesystemWithLittleFreeHasNothingReservedOnIt() async throws {
    // 64 MiB, under the margin a reservation must leave free.
    let small = fixture.directory.appendingPathComponent("small").path
    try FileManager.default.createDirectory(atPath: small, withIntermediateDirectories: true)
    try #require(mount("none", small, "tmpfs", 0, "size=64m") == 0, "mount tmpfs: \(String(cString: strerror(errno)))")
    defer { umount2(small, Int32(MNT_DETACH)) }
    try #require(Transfer.reservationMargin > 64 << 20)
    var configuration = fixture.configuration()
    configuration.temporaryDirectory = small
    let body = DownloadFixture.bytes(8 << 20)
    let server = try FaultServer(body: body, mode: .gateAfter(bytes: Self.pastHalf))
    defer { server.stop() }
    let session = try DownloadSession(configuration: configuration)
    defer { session.invalidate() }
    let task = try session.downloadTask(with: server.url())
    task.resume()
    await session.waitForProgress(of: task, atLeast: Int64(Self.pastHalf))
    let name = try #require(try FileManager.default.contentsOfDirectory(atPath: small).first)
    let during = try allocation(small + "/" + name)
    #expect(during.allocated <= during.size + 256 * 1024, "\(during)")
    server.openGate()
    #expect(await task.waitUntilSettled() == .completed, "\(String(describing: task.error))")
    #expect(fixture.destinationContents("file.bin") == body)
  }

  @Test func aBodyCutShortGivesBackWhatWasReservedForItsRest() async throws {
    let body = DownloadFixture.bytes(8 << 20)
    let server = try FaultServer(body: body, mode: .stallAfter(bytes: Self.pastOne))
    defer { server.stop() }
    let session = try DownloadSession(configuration: fixture.configuration())
    defer { session.invalidate() }
    let task = try session.downloadTask(with: server.url())
    task.resume()
    await session.waitForProgress(of: task, atLeast: Int64(Self.pastOne))
    let during = try allocation(try temporaryFilePath)
    #expect(during.allocated >= 2 << 20, "\(during)")
    let data = try #require(await task.cancelByProducingResumeData())
    let resume = try DownloadResumeData(data: data)
    let kept = try allocation(fixture.temporaryDirectory + "/" + resume.temporaryFileName)
    #expect(kept.size == resume.bytesReceived)
    // What was reserved for the rest went back with the truncate to the file's own size.
    #expect(kept.allocated <= kept.size + 64 * 1024, "\(kept)")
    server.setMode(.normal)
    let resumed = try session.downloadTask(withResumeData: data)
    resumed.resume()
    #expect(await resumed.waitUntilSettled() == .completed, "\(String(describing: resumed.error))")
    #expect(fixture.destinationContents("file.bin") == body)
  }

  @Test func aResumedBodyGivesBackWhatAKilledAttemptLeftReserved() async throws {
    let body = DownloadFixture.bytes(8 << 20)
    let server = try FaultServer(body: body, mode: .stallAfter(bytes: 1 << 20))
    defer { server.stop() }
    let session = try DownloadSession(configuration: fixture.configuration())
    defer { session.invalidate() }
    let task = try session.downloadTask(with: server.url())
    task.resume()
    await session.waitForProgress(of: task, atLeast: 1 << 20)
    let data = try #require(await task.cancelByProducingResumeData())
    let resume = try DownloadResumeData(data: data)
    // As a process killed mid-body leaves it: 32 MiB reserved past the kept bytes, beyond even
    // the whole body's length.
    let keptPath = fixture.temporaryDirectory + "/" + resume.temporaryFileName
    let fd = open(keptPath, O_WRONLY | O_NOFOLLOW)
    try #require(fd >= 0)
    let reserved = Kernel.reserveSpace(fd, offset: resume.bytesReceived, length: 32 << 20)
    close(fd)
    try #require(reserved == 0)
    try #require(try allocation(keptPath).allocated >= 32 << 20)
    server.setMode(.normal)
    let resumed = try session.downloadTask(withResumeData: data)
    resumed.resume()
    #expect(await resumed.waitUntilSettled() == .completed, "\(String(describing: resumed.error))")
    #expect(fixture.destinationContents("file.bin") == body)
    let placed = try allocation(fixture.destinationDirectory + "/file.bin")
    #expect(placed.allocated <= Int64(body.count) + 64 * 1024, "\(placed)")
  }

  @Test func aBodyOfUnknownLengthKeepsNoReservationPastItsEnd() async throws {
    // 3 MiB: the window reserved ahead (64 MiB) reaches far past the end the server only shows
    // by closing the connection.
    let body = DownloadFixture.bytes(3 << 20)
    let server = try FaultServer(body: body, mode: .unknownLength)
    defer { server.stop() }
    let session = try DownloadSession(configuration: fixture.configuration())
    defer { session.invalidate() }
    let task = try session.downloadTask(with: server.url())
    task.resume()
    #expect(await task.waitUntilSettled() == .completed, "\(String(describing: task.error))")
    #expect(fixture.destinationContents("file.bin") == body)
    let placed = try allocation(fixture.destinationDirectory + "/file.bin")
    #expect(placed.size == Int64(body.count))
    #expect(placed.allocated <= Int64(body.count) + 64 * 1024, "\(placed)")
  }

  #if DEBUG
    @Test func aReservationTheFilesystemRefusesIsGivenUpAndTheBodyWrittenAsBefore() async throws {
      let body = DownloadFixture.bytes(8 << 20)
      let server = try FaultServer(body: body)
      defer { server.stop() }
      let session = try DownloadSession(configuration: fixture.configuration())
      defer { session.invalidate() }
      let task = try session.downloadTask(with: server.url())
      let faults = SyscallFaults()
      faults.fail(.fallocate, with: ENOSPC, times: 3)
      // The engine thread starts with the plan of the thread that posts its first command.
      faults.during { task.resume() }
      #expect(await task.waitUntilSettled() == .completed, "\(String(describing: task.error))")
      #expect(fixture.destinationContents("file.bin") == body)
      // Refused once, not asked again: a full disk is the writes' to report.
      #expect(faults.injectedCount(.fallocate) == 1)
    }
  #endif

  @Test func aSmallBodyReservesNothing() async throws {
    let body = DownloadFixture.bytes(100_000)
    let server = try FaultServer(body: body, mode: .gateAfter(bytes: 50_000))
    defer { server.stop() }
    let session = try DownloadSession(configuration: fixture.configuration())
    defer { session.invalidate() }
    let task = try session.downloadTask(with: server.url())
    task.resume()
    server.openGate()
    #expect(await task.waitUntilSettled() == .completed, "\(String(describing: task.error))")
    let placed = try allocation(fixture.destinationDirectory + "/file.bin")
    #expect(placed.allocated <= 128 * 1024, "\(placed)")
  }
}
