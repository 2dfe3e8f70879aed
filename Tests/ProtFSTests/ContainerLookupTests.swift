import Foundation
import ProtFS
import ProtFSSystem
import ProtFSTestSupport
import Testing

/// A bundle id becomes a container in one place (`requireExists`), which says which container a
/// misspelt id meant; a path read in a container (`Container.resolve`) never leaves it.
@Suite struct ContainerLookupTests {
  static let containers = ["com.example.app", "com.example.tool", "org.unrelated.thing"]

  @Test(arguments: [
    ("com.exmaple.app", "com.example.app"), ("com.example.ap", "com.example.app"),
    ("COM.Example.App", "com.example.app"), ("example.tool", "com.example.tool"),
    ("org.unrelated", "org.unrelated.thing"), ("com.example.tol", "com.example.tool"),
  ])
  func aNearMissIsOffered(typed: String, meant: String) throws {
    let t = try TestDevice(containers: Self.containers)
    #expect(t.device.nearestContainer(to: try BundleID(typed))?.rawValue == meant)
    let error = #expect(throws: ProtFSError.self) { try t.device.container(try BundleID(typed)).requireExists() }
    #expect(error?.code == .notFound)
    #expect(error?.message.hasSuffix("has no container on the device '\(t.root)'. Did you mean \(meant)?") == true)
  }

  @Test(arguments: ["com.example.other", "net.example.app", "com.example"])
  func anUnrelatedOrAmbiguousIdIsNoNearMiss(typed: String) throws {
    let t = try TestDevice(containers: Self.containers)
    #expect(t.device.nearestContainer(to: try BundleID(typed)) == nil)
  }

  @Test func withoutANearMissTheFewContainersAreNamed() throws {
    let t = try TestDevice(containers: Self.containers)
    let error = #expect(throws: ProtFSError.self) { try t.device.container(try BundleID("net.x.y")).requireExists() }
    let list = "com.example.app, com.example.tool and org.unrelated.thing"
    #expect(error?.message.hasSuffix("whose containers are \(list).") == true, "\(String(describing: error))")
    let empty = try TestDevice()
    let none = #expect(throws: ProtFSError.self) { try empty.device.container(try BundleID("net.x.y")).requireExists() }
    #expect(none?.message.hasSuffix("which has none yet.") == true)
  }

  @Test func aLinkAtAContainersNameIsNoContainerAndIsNotCreatedOver() throws {
    let t = try TestDevice(containers: [])
    let outside = try TestDevice.makeTemporaryDirectory()
    defer { TestDevice.removeTree(outside) }
    let id = try BundleID("com.example.linked")
    try FileManager.default.createSymbolicLink(
      atPath: t.containerPath(id.rawValue), withDestinationPath: outside)
    let error = #expect(throws: ProtFSError.self) { try t.device.container(id).requireExists() }
    #expect(error?.code == .symlink)
    let created = #expect(throws: ProtFSError.self) { try t.device.createContainer(id) }
    #expect(created?.code == .symlink)
    #expect(try FileManager.default.contentsOfDirectory(atPath: outside).isEmpty)
  }

  @Test(arguments: [
    ("Documents/a.txt", "Documents/a.txt"), ("./Documents/../tmp", "tmp"), ("", ""), (".", ""),
    ("Documents//a", "Documents/a"), ("Documents/link/..", "Documents"),
  ])
  func aPathInTheContainerResolvesInsideIt(path: String, inside: String) throws {
    let t = try TestDevice(containers: ["com.example.app"])
    let container = t.device.container(try BundleID("com.example.app"))
    #expect(try container.resolve(path) == (inside.isEmpty ? container.path : try container.path(inside)))
    let absolute = try container.resolve(t.containerPath("com.example.app", path))
    #expect(try absolute == container.resolve(path))
  }

  @Test(arguments: ["..", "../com.example.other/Documents", "Documents/../../x", "tmp/../../../..", "/etc/passwd"])
  func aPathThatLeavesTheContainerIsRefused(path: String) throws {
    let t = try TestDevice(containers: ["com.example.app", "com.example.other"])
    let container = t.device.container(try BundleID("com.example.app"))
    let error = #expect(throws: ProtFSError.self) { try container.resolve(path) }
    #expect(error?.code == .outsideDevice)
    #expect(error?.message.contains("The path '\(path)' is outside the container of com.example.app") == true)
    let other = #expect(throws: ProtFSError.self) { try container.resolve(t.containerPath("com.example.other")) }
    #expect(other?.code == .outsideDevice)
  }
}
