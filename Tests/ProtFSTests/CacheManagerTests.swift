import Foundation
import ProtFS
import ProtFSCache
import ProtFSSystem
import ProtFSTestSupport
import Testing

/// A fixed set of tasks, standing in for the download store.
struct FixedTasks: DownloadTaskDirectory {
  var byBundle: [String: [AttachedTask]]
  func tasks(for bundleID: BundleID) throws(ProtFSError) -> [AttachedTask] { byBundle[bundleID.rawValue] ?? [] }
}

@Suite struct CacheManagerTests {
  let app = "com.example.app"

  /// A container with cache files of known ages (days ago) and sizes, and files that must never be purged.
  func populated() throws -> TestDevice {
    let t = try TestDevice(containers: [app])
    _ = try t.device.initCache(try BundleID(app))
    try FileManager.default.createDirectory(
      atPath: t.containerPath(app, "Library/Caches/img"), withIntermediateDirectories: true)
    for (name, days, size) in [
      ("Library/Caches/img/old.jpg", 30, 8192), ("Library/Caches/img/mid.jpg", 5, 8192),
      ("Library/Caches/new.json", 0, 4096), ("tmp/scratch", 2, 4096),
    ] {
      try write(t, name, size: size, daysAgo: days)
    }
    for keep in ["Documents/user.db", "Library/Application Support/state.plist", "Library/Preferences/app.plist"] {
      try write(t, keep, size: 4096, daysAgo: 400)
    }
    return t
  }

  func write(_ t: TestDevice, _ relative: String, size: Int, daysAgo: Int) throws {
    let path = t.containerPath(app, relative)
    try Data(repeating: 7, count: size).write(to: URL(fileURLWithPath: path))
    let when = Date().addingTimeInterval(-Double(daysAgo) * 86400)
    try FileManager.default.setAttributes([.modificationDate: when], ofItemAtPath: path)
    var times = [
      timespec(tv_sec: Int(when.timeIntervalSince1970), tv_nsec: 0),
      timespec(tv_sec: Int(when.timeIntervalSince1970), tv_nsec: 0),
    ]
    #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
  }

  func exists(_ t: TestDevice, _ relative: String) -> Bool {
    FileManager.default.fileExists(atPath: t.containerPath(app, relative))
  }

  @Test func usageCountsApparentAndDiskBytesPerDirectory() throws {
    let t = try populated()
    let report = try CacheManager(device: t.device).usage(try BundleID(app))
    #expect(report.count == 1)
    let caches = report[0].directories[0]
    #expect(caches.path == "Library/Caches" && caches.usage.files == 3 && caches.usage.apparentBytes == 8192 * 2 + 4096)
    #expect(caches.usage.diskBytes >= caches.usage.apparentBytes)
    #expect(report[0].directories[1].usage.files == 1 && report[0].total.files == 4)
    // A hard link is counted once, as du counts it.
    #expect(link(t.containerPath(app, "Library/Caches/new.json"), t.containerPath(app, "tmp/link.json")) == 0)
    #expect(try CacheManager(device: t.device).usage(try BundleID(app))[0].total.apparentBytes == 8192 * 2 + 4096 * 2)
  }

  @Test func listShowsClassesTasksAndOrphans() throws {
    let t = try populated()
    let downloads = t.containerPath(app, "Library/Caches/com.apple.nsurlsessiond/Downloads/\(app)")
    try t.writeFile(downloads + "/CFNetworkDownload_AAAAAA.tmp")
    try t.writeFile(downloads + "/CFNetworkDownload_BBBBBB.tmp")
    let task = AttachedTask(
      id: "1", session: "bg", state: "running", url: "https://example.com/a", bytesReceived: 4,
      temporaryFileName: "CFNetworkDownload_AAAAAA.tmp", isRunning: true, isResumable: false)
    let manager = CacheManager(device: t.device, tasks: FixedTasks(byBundle: [app: [task]]))
    let report = try manager.list()[0]
    #expect(
      report.directories.map(\.protectionClass) == [
        "NSFileProtectionCompleteUntilFirstUserAuthentication", "NSFileProtectionCompleteUntilFirstUserAuthentication",
      ])
    #expect(report.downloads?.protectionClass == "NSFileProtectionNone")
    #expect(report.downloads?.tasks == [task] && report.downloads?.orphans == ["CFNetworkDownload_BBBBBB.tmp"])
    #expect(report.directories[0].usage.oldest! < report.directories[0].usage.newest!)
  }

  @Test func olderThanRemovesOnlyOldPurgeableItems() throws {
    let t = try populated()
    let report = try CacheManager(device: t.device).purge(criteria: PurgeCriteria(olderThan: 3 * 86400))
    #expect(report.removed.map(\.path) == ["Library/Caches/img/old.jpg", "Library/Caches/img/mid.jpg"])
    #expect(
      !exists(t, "Library/Caches/img/old.jpg") && exists(t, "tmp/scratch") && exists(t, "Library/Caches/new.json"))
    for keep in ["Documents/user.db", "Library/Application Support/state.plist", "Library/Preferences/app.plist"] {
      #expect(exists(t, keep))
    }
    // Directories stay, with their classes.
    #expect(
      t.rawClass(t.containerPath(app, "Library/Caches/com.apple.nsurlsessiond/Downloads/\(app)"))
        == "NSFileProtectionNone")
  }

  @Test func maxSizeRemovesLeastRecentlyUsedFirst() throws {
    let t = try populated()
    let manager = CacheManager(device: t.device)
    let before = try manager.usage(try BundleID(app))[0].total.diskBytes
    let limit = before - 8192
    let report = try manager.purge(try BundleID(app), criteria: PurgeCriteria(maxSize: limit))
    #expect(report.removed.map(\.path) == ["Library/Caches/img/old.jpg"] && report.removed[0].reason == "max-size")
    #expect(try manager.usage(try BundleID(app))[0].total.diskBytes <= limit)
  }

  @Test func dryRunChangesNothing() throws {
    let t = try populated()
    let report = try CacheManager(device: t.device).purge(criteria: PurgeCriteria(), dryRun: true)
    #expect(report.dryRun && report.removed.count == 4 && report.freedApparentBytes == 8192 * 2 + 4096 * 2)
    #expect(exists(t, "Library/Caches/img/old.jpg") && exists(t, "tmp/scratch"))
  }

  @Test func runningAndResumableTempFilesAreKept() throws {
    let t = try populated()
    let downloads = "Library/Caches/com.apple.nsurlsessiond/Downloads/\(app)"
    for name in ["CFNetworkDownload_RUNNIN.tmp", "CFNetworkDownload_RESUME.tmp", "CFNetworkDownload_ORPHAN.tmp"] {
      try write(t, downloads + "/" + name, size: 1024, daysAgo: 40)
    }
    let tasks = FixedTasks(byBundle: [
      app: [
        AttachedTask(
          id: "1", session: "s", state: "running", url: "u", bytesReceived: 1,
          temporaryFileName: "CFNetworkDownload_RUNNIN.tmp", isRunning: true, isResumable: true),
        AttachedTask(
          id: "2", session: "s", state: "suspended", url: "u", bytesReceived: 1,
          temporaryFileName: "CFNetworkDownload_RESUME.tmp", isRunning: false, isResumable: true),
      ]
    ])
    let manager = CacheManager(device: t.device, tasks: tasks)
    let orphans = try manager.purge(criteria: PurgeCriteria(orphans: true))
    #expect(orphans.removed.map(\.path) == [downloads + "/CFNetworkDownload_ORPHAN.tmp"])
    let everything = try manager.purge(criteria: PurgeCriteria())
    #expect(!everything.removed.map(\.path).contains { $0.contains("CFNetworkDownload") })
    #expect(everything.kept.count == 2)
    let resumable = try manager.purge(criteria: PurgeCriteria(includeResumable: true))
    #expect(resumable.removed.map(\.path) == [downloads + "/CFNetworkDownload_RESUME.tmp"])
    #expect(exists(t, downloads + "/CFNetworkDownload_RUNNIN.tmp"))
  }

  @Test func aTempFileHeldOpenByADownloaderIsKept() throws {
    let t = try populated()
    let path = t.containerPath(
      app, "Library/Caches/com.apple.nsurlsessiond/Downloads/\(app)/CFNetworkDownload_HELD01.tmp")
    try t.writeFile(path)
    let fd = open(path, O_RDONLY)
    defer { close(fd) }
    TemporaryFileLock.hold(fd)
    let report = try CacheManager(device: t.device).purge(criteria: PurgeCriteria(orphans: true))
    #expect(report.removed.isEmpty && report.kept.first?.contains("holds it open") == true)
    #expect(FileManager.default.fileExists(atPath: path))
  }

  @Test func symlinksAreRemovedNeverFollowed() throws {
    let t = try populated()
    let outside = try TestDevice.makeTemporaryDirectory()
    defer { TestDevice.removeTree(outside) }
    try "precious".write(toFile: outside + "/file", atomically: false, encoding: .utf8)
    try FileManager.default.createSymbolicLink(
      atPath: t.containerPath(app, "Library/Caches/link"), withDestinationPath: outside)
    _ = try CacheManager(device: t.device).purge(criteria: PurgeCriteria())
    #expect(FileManager.default.fileExists(atPath: outside + "/file"))
    #expect(
      (try? FileManager.default.destinationOfSymbolicLink(atPath: t.containerPath(app, "Library/Caches/link"))) == nil)
  }

  @Test func storagePressureFreesOldestFirstAcrossContainers() throws {
    let t = try populated()
    try t.device.createContainer(try BundleID("com.example.other"))
    let other = t.containerPath("com.example.other", "Library/Caches/ancient.bin")
    try Data(repeating: 1, count: 4096).write(to: URL(fileURLWithPath: other))
    var times = [timespec(tv_sec: 1_000_000_000, tv_nsec: 0), timespec(tv_sec: 1_000_000_000, tv_nsec: 0)]
    #expect(utimensat(AT_FDCWD, other, &times, 0) == 0)
    let report = try CacheManager(device: t.device).simulateStoragePressure(free: 10000)
    #expect(report.removed.map(\.path) == ["Library/Caches/ancient.bin", "Library/Caches/img/old.jpg"])
    #expect(report.freedDiskBytes >= 10000 && exists(t, "Library/Caches/img/mid.jpg"))
  }

  @Test func unknownBundleIsAClearError() throws {
    let t = try TestDevice()
    #expect { try CacheManager(device: t.device).usage(try BundleID("com.example.none")) } throws: {
      let e = $0 as! ProtFSError
      return e.code == .notFound && e.description.contains("com.example.none")
        && e.remedy == .createContainer(bundleID: "com.example.none")
    }
  }
}
