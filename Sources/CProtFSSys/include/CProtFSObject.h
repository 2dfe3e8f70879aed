#ifndef CPROTFSOBJECT_H
#define CPROTFSOBJECT_H

/* An instance of a class known by its metadata alone, made with its `init()`, as UIKit's
   UIApplicationMain makes the delegate class it is named (the Objective-C runtime's +alloc and
   -init). Swift lets a metatype call only a `required` init, and Foundation's NSObject.init() is
   not one, so an app delegate that inherits from NSObject could not be made in Swift.

   The class's init() is still dispatched through its vtable (NSObject.init's allocating entry,
   which every subclass overrides or inherits): it is found as the Swift runtime finds a method of
   a class of another module (swift_lookUpClassMethod, with Foundation's descriptors of NSObject
   and of its init), and called as Swift calls it (swiftcall, the class as self). */

/* A new instance (+1) of `cls`, the metadata of a class that inherits from Foundation's NSObject;
   NULL when the runtime or Foundation lacks what it takes (then nothing was made). */
void *protfs_make_object(const void *cls);

#endif
