import Foundation
import ProtFSSystem
import Testing

/// A class as app delegates that inherit from NSObject are written: stored properties with
/// initial values, and an init that does more.
class MadeByName: NSObject {
  var launches = 1
  var names = ["first"]
  let madeBy: String

  override init() {
    madeBy = "init()"
    names.append("second")
    super.init()
  }
}

/// A subclass that inherits its init.
final class MadeByNameSubclass: MadeByName {
  var extra = 42
}

/// `ObjectMaker`, which `UIApplicationMain` makes an NSObject delegate with: the class's own init,
/// as `type.init()` would run it, for a class known by its name alone.
@Suite struct ObjectMakerTests {
  @Test func aClassKnownByItsNameIsMadeWithItsInit() throws {
    let found = try #require(NSClassFromString(NSStringFromClass(MadeByName.self)) as? NSObject.Type)
    let made = try #require(ObjectMaker.make(found) as? MadeByName)
    #expect(type(of: made) == MadeByName.self)
    #expect(made.launches == 1)
    #expect(made.names == ["first", "second"])
    #expect(made.madeBy == "init()")

    let sub = try #require(ObjectMaker.make(MadeByNameSubclass.self) as? MadeByNameSubclass)
    #expect(sub.extra == 42 && sub.names == ["first", "second"])
    #expect(ObjectMaker.make(NSObject.self).map { type(of: $0) == NSObject.self } == true)
  }

  /// What it makes is released as any object is (it was made +1 and handed over once).
  @Test func whatItMakesIsReleased() throws {
    weak var released: NSObject?
    do {
      let made = try #require(ObjectMaker.make(MadeByName.self))
      released = made
      #expect(released != nil)
    }
    #expect(released == nil)
  }
}
