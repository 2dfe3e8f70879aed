import Foundation
import ProtFS
import ProtFSTestSupport
import Testing

/// Created by root, a container belongs to the app user; the device's own directories stay root's.
@Suite struct ContainerOwnershipTests {
  func owner(_ path: String) -> (uid: uid_t, gid: gid_t, mode: mode_t) {
    var info = stat()
    #expect(lstat(path, &info) == 0, "\(path)")
    return (info.st_uid, info.st_gid, info.st_mode & 0o7777)
  }

  @Test(.enabled(if: geteuid() == 0, "only root can hand directories to another user"))
  func theContainerAndItsStandardDirectoriesBelongToTheAppUser() throws {
    let t = try TestDevice()
    let bundle = try BundleID("com.example.owned")
    _ = try t.device.initCache(bundle)  // init-cache creates the container when there is none
    let container = t.containerPath("com.example.owned")
    for relative in [""] + Container.standardDirectories {
      let path = relative.isEmpty ? container : container + "/" + relative
      let found = owner(path)
      #expect(found.uid == AppUser.standard.uid && found.gid == AppUser.standard.gid, "\(relative)")
    }
    let state = owner(t.path(".protfs"))
    #expect(state.uid == 0 && state.mode == 0o700)
    #expect(owner(t.path(".protfs/staging")).uid == 0)
    let containers = owner(t.path("Containers"))
    #expect(containers.uid == 0 && containers.mode & 0o022 == 0)
    #expect(owner(t.root).uid == 0)
  }

  @Test(.enabled(if: geteuid() == 0, "only root can hand directories to another user"))
  func theCacheDirectoriesInitCacheMakesBelongToTheAppUserAndKeepTheirClass() throws {
    let t = try TestDevice()
    let bundle = try BundleID("com.example.cached")
    let made = try t.device.initCache(bundle)
    let container = t.containerPath("com.example.cached")
    for relative in [
      "Library/Caches/com.apple.nsurlsessiond", "Library/Caches/com.apple.nsurlsessiond/Downloads",
      "Library/Caches/com.apple.nsurlsessiond/Downloads/com.example.cached",
    ] {
      let found = owner(container + "/" + relative)
      #expect(found.uid == AppUser.standard.uid && found.gid == AppUser.standard.gid, "\(relative)")
      #expect(found.mode == 0o755, "\(relative)")
    }
    #expect(made.path == container + "/Library/Caches/com.apple.nsurlsessiond/Downloads/com.example.cached")
    #expect(try t.device.effectiveClass(of: t.device.resolve(made.path)).protectionClass == .none)
    // What existed before keeps its owner: only what init-cache made is handed over.
    #expect(owner(t.path("Containers")).uid == 0)
  }
}
