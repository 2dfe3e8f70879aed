import CProtFSSys
import Foundation

/// Makes an instance of a class that inherits from `NSObject` from its metatype alone, with its
/// `init()`, as the Objective-C runtime's `+alloc` and `-init` make one on Apple's platforms
/// (CProtFSObject.h). Swift lets a metatype call only a `required` init, and `NSObject.init()` is
/// not one; the class's own `init()` is still reached through its vtable, which this calls.
package enum ObjectMaker {
  /// A new instance of `type`, made with its `init()` (its stored properties' initial values and
  /// its init's body, as `type.init()` would); nil when the Swift runtime or Foundation lacks what
  /// it takes to find the init.
  package static func make(_ type: NSObject.Type) -> NSObject? {
    let metadata = unsafeBitCast(type as AnyClass, to: UnsafeRawPointer.self)
    guard let object = protfs_make_object(metadata) else { return nil }
    return Unmanaged<NSObject>.fromOpaque(object).takeRetainedValue()
  }
}
